#!/usr/bin/env bash
# Fetch Spark's own Kafka source (org.apache.spark:spark-sql-kafka-0-10_2.13)
# and the runtime dependencies that pyspark does not already ship, from Maven
# Central (with Maven), into
#   ${KAFKALOG_SPARK_JARS_CACHE:-$HOME/.cache/kafkalog/spark-kafka}/VERSION/
#
# Used by tests/test_spark_kafka_referee.py as the referee for kafkalog's Spark
# data source: `spark.jars` = the comma-joined *.jar paths of that directory.
#
# Idempotent: a marker file (VERSION/.complete) records a complete fetch, so a
# second run is instant. On success prints the jar directory and nothing else
# on stdout. Maven's ~/.m2 cache is reused between runs.
#
# Kept (4.2.0): spark-sql-kafka-0-10_2.13, spark-token-provider-kafka-0-10_2.13,
# kafka-clients, commons-pool2. Left out, because pyspark's own jars/ has them
# (a second copy on the classpath would only risk version clashes): Spark and
# Scala artifacts, Hadoop client jars, slf4j, compression codecs (lz4, snappy,
# zstd), jsr305.
set -euo pipefail

VERSION="${1:-4.2.0}"
SCALA="2.13"
CACHE="${KAFKALOG_SPARK_JARS_CACHE:-$HOME/.cache/kafkalog/spark-kafka}"
DEST="$CACHE/$VERSION"
MARKER="$DEST/.complete"
MAIN_JAR="spark-sql-kafka-0-10_$SCALA-$VERSION.jar"

if [[ -f "$MARKER" && -f "$DEST/$MAIN_JAR" ]]; then
    echo "$DEST"
    exit 0
fi

command -v mvn >/dev/null || { echo "fetch_spark_kafka: mvn (Maven) not found on PATH" >&2; exit 1; }

# groupIds / artifactIds that pyspark ships in pyspark/jars/
EXCLUDE_GROUPS="org.scala-lang,org.scala-lang.modules,org.slf4j,org.apache.hadoop,org.apache.logging.log4j,com.google.code.findbugs,org.xerial.snappy,org.lz4,at.yawk.lz4,com.github.luben"
EXCLUDE_ARTIFACTS="spark-core_$SCALA,spark-sql_$SCALA,spark-sql-api_$SCALA,spark-catalyst_$SCALA,spark-tags_$SCALA,spark-unsafe_$SCALA,spark-common-utils_$SCALA,spark-network-common_$SCALA,spark-launcher_$SCALA"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kafkalog-spark-fetch-XXXXXX")"
TMPDEST="$DEST.tmp.$$"
trap 'rm -rf "$WORK" "$TMPDEST"' EXIT
mkdir -p "$CACHE"

cat > "$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkalog.harness</groupId>
  <artifactId>spark-kafka-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_$SCALA</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
POM

rm -rf "$TMPDEST"
if ! mvn -B -q -f "$WORK/pom.xml" \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime \
        -DexcludeGroupIds="$EXCLUDE_GROUPS" \
        -DexcludeArtifactIds="$EXCLUDE_ARTIFACTS" \
        -DoutputDirectory="$TMPDEST" >"$WORK/mvn.log" 2>&1; then
    echo "fetch_spark_kafka: Maven failed to fetch spark-sql-kafka-0-10_$SCALA:$VERSION; last lines of Maven's output:" >&2
    tail -n 30 "$WORK/mvn.log" >&2
    exit 1
fi

for want in "$MAIN_JAR" "spark-token-provider-kafka-0-10_$SCALA-$VERSION.jar" "kafka-clients-*.jar" "commons-pool2-*.jar"; do
    # shellcheck disable=SC2086
    ls "$TMPDEST"/$want >/dev/null 2>&1 || { echo "fetch_spark_kafka: $want missing after fetch" >&2; exit 1; }
done

rm -rf "$DEST"
mv "$TMPDEST" "$DEST"
date -u +%Y-%m-%dT%H:%M:%SZ > "$MARKER"
echo "$DEST"
