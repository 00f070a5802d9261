#!/usr/bin/env bash
# Fetch Apache Kafka broker + tool jars for VERSION from Maven Central (with Maven)
# into   ${KAFKALOG_KAFKA_CACHE:-$HOME/.cache/kafkalog/kafka}/VERSION/libs/
#
# Idempotent: a marker file (VERSION/.complete) records a complete fetch, so a
# second run is instant. On success prints the libs directory and nothing else
# on stdout. Maven's ~/.m2 cache is reused between runs.
#
# Layout:
#   VERSION/libs/            broker classpath (kafka.Kafka, kafka.tools.StorageTool,
#                            kafka.tools.DumpLogSegments up to 4.2, kafka-tools jar
#                            with org.apache.kafka.tools.DumpLogSegments from 4.3)
#   VERSION/tools-fallback/  only when org.apache.kafka:kafka-tools:VERSION is not
#                            published on Maven Central (seen for 4.4.0): a complete
#                            classpath (kafka-tools + deps) of the nearest earlier
#                            release, used INSTEAD of libs/* for DumpLogSegments.
#                            tools-fallback/VERSION.txt names that release.
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 KAFKA_VERSION   (e.g. 4.4.0, 3.9.2)" >&2
    exit 2
fi
VERSION="$1"
CACHE="${KAFKALOG_KAFKA_CACHE:-$HOME/.cache/kafkalog/kafka}"
DEST="$CACHE/$VERSION"
LIBS="$DEST/libs"
MARKER="$DEST/.complete"

if [[ -f "$MARKER" && -d "$LIBS" ]]; then
    echo "$LIBS"
    exit 0
fi

command -v mvn >/dev/null || { echo "fetch_kafka: mvn (Maven) not found on PATH" >&2; exit 1; }
command -v java >/dev/null || { echo "fetch_kafka: java not found on PATH" >&2; exit 1; }

# kafka-tools release to use when kafka-tools:$VERSION is missing from Central.
tools_fallback_for() {
    if [[ -n "${KAFKALOG_KAFKA_TOOLS_FALLBACK:-}" ]]; then echo "$KAFKALOG_KAFKA_TOOLS_FALLBACK"; return; fi
    case "$1" in
        4.4.*) echo 4.3.1 ;;
        *) echo "" ;;
    esac
}

MAJOR="${VERSION%%.*}"
# Logging binding so the broker writes its log:
#  3.x: slf4j 1.7 -> reload4j (log4j 1 API), configured with log4j.properties
#  4.x: slf4j     -> log4j2, configured with log4j2.properties. Kafka itself
#       resolves slf4j-api 1.7.x, whose binding is log4j-slf4j-impl; the slf4j2
#       provider is added too so a later Kafka on slf4j 2 still logs.
if [[ "$MAJOR" -ge 4 ]]; then
    LOGGING_DEPS='
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-1.2-api</artifactId><version>2.24.3</version></dependency>'
else
    LOGGING_DEPS='
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
    <dependency><groupId>ch.qos.reload4j</groupId><artifactId>reload4j</artifactId><version>1.2.25</version></dependency>'
fi

# kafka-tools pulls in connect-runtime (jetty, jersey, ...) which neither the
# broker nor DumpLogSegments needs: exclude it.
tools_dep() {  # $1 = kafka version
    echo "
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$1</version>
      <exclusions>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId></exclusion>
      </exclusions>
    </dependency>"
}

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kafkalog-fetch-XXXXXX")"
TMPLIBS="$DEST/libs.tmp.$$"
TMPFB="$DEST/tools-fallback.tmp.$$"
trap 'rm -rf "$WORK" "$TMPLIBS" "$TMPLIBS.keep" "$TMPFB"' EXIT
mkdir -p "$DEST"

write_pom() {  # $1 = kafka version, $2 = extra dependency xml
    cat > "$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkalog.harness</groupId>
  <artifactId>kafka-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$1</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$1</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$1</version></dependency>
$2
$LOGGING_DEPS
  </dependencies>
</project>
POM
}

copy_deps() {  # $1 = output dir
    rm -rf "$1"
    mvn -B -q -f "$WORK/pom.xml" \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$1" >"$WORK/mvn.log" 2>&1
}

fail_mvn() {
    echo "fetch_kafka: $1; last lines of Maven's output:" >&2
    tail -n 30 "$WORK/mvn.log" >&2
    exit 1
}

FALLBACK=""
write_pom "$VERSION" "$(tools_dep "$VERSION")"
if ! copy_deps "$TMPLIBS"; then
    if grep -Eq "org.apache.kafka:kafka-tools:jar:$VERSION (was not found|in central)|Could not find artifact org.apache.kafka:kafka-tools:jar:$VERSION" "$WORK/mvn.log"; then
        FALLBACK="$(tools_fallback_for "$VERSION")"
        [[ -n "$FALLBACK" ]] || fail_mvn "kafka-tools:$VERSION is not on Maven Central and no fallback is known (set KAFKALOG_KAFKA_TOOLS_FALLBACK)"
        echo "fetch_kafka: kafka-tools:$VERSION not published; using kafka-tools:$FALLBACK for DumpLogSegments" >&2
        write_pom "$VERSION" ""
        copy_deps "$TMPLIBS" || fail_mvn "Maven failed to fetch Kafka $VERSION"
        # The fallback kafka-tools is not binary compatible with $VERSION's jars
        # (e.g. 4.3.1's DumpLogSegments calls FileRecords.closeHandlers(), gone
        # in 4.4.0), so tools-fallback/ is a complete classpath of $FALLBACK.
        mv "$TMPLIBS" "$TMPLIBS.keep"
        write_pom "$FALLBACK" "$(tools_dep "$FALLBACK")"
        copy_deps "$TMPFB" || fail_mvn "Maven failed to fetch kafka-tools:$FALLBACK"
        mv "$TMPLIBS.keep" "$TMPLIBS"
        echo "$FALLBACK" > "$TMPFB/VERSION.txt"
        if ls "$TMPFB"/slf4j-api-2.* >/dev/null 2>&1; then
            rm -f "$TMPFB"/log4j-slf4j-impl-*.jar
        else
            rm -f "$TMPFB"/log4j-slf4j2-impl-*.jar
        fi
    else
        fail_mvn "Maven failed to fetch Kafka $VERSION"
    fi
fi

# Keep only the log4j2 slf4j binding matching the slf4j-api that Kafka resolved
# (both share class names, so having both breaks logging initialisation).
if ls "$TMPLIBS"/slf4j-api-2.* >/dev/null 2>&1; then
    rm -f "$TMPLIBS"/log4j-slf4j-impl-*.jar
else
    rm -f "$TMPLIBS"/log4j-slf4j2-impl-*.jar
fi

[[ -f "$TMPLIBS/kafka_2.13-$VERSION.jar" ]] || { echo "fetch_kafka: kafka_2.13-$VERSION.jar missing after fetch" >&2; exit 1; }

rm -rf "$LIBS" "$DEST/tools-fallback"
mv "$TMPLIBS" "$LIBS"
[[ -n "$FALLBACK" ]] && mv "$TMPFB" "$DEST/tools-fallback"
date -u +%Y-%m-%dT%H:%M:%SZ > "$MARKER"
echo "$LIBS"
