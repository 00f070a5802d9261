//! A Kafka data dir as Kafka's `LogManager` sees it: `<topic>-<partition>` folders, topics and
//! their partition counts, Kafka's topic-name rules; and writing many partitions at once with
//! all-or-nothing commit (staged batches appended by one writer, rolled back on failure).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::internal_topics::cluster_metadata::{self, LiveTopics};
use crate::log::checkpoint::parse_topic_partition;
use crate::log::checkpoint::{parse_partition_dir, PartitionDirKind, PartitionMetadataFile};
use crate::log::{Log, LogOptions};
use crate::record::file_records::FileRecords;

/// How many bytes of staged batches one append takes.
const APPEND_CHUNK_BYTES: usize = 4 << 20;

/// One live partition folder of a data dir.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PartitionFolder {
    pub topic: String,
    pub partition: i32,
    pub path: PathBuf,
}

/// Kafka's `Topic.MAX_NAME_LENGTH`.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Kafka's `Topic.validate`: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        Some("is empty".to_string())
    } else if name == "." || name == ".." {
        Some("cannot be '.' or '..'".to_string())
    } else if name.len() > MAX_TOPIC_NAME_LENGTH {
        Some(format!(
            "is {} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}",
            name.len()
        ))
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            .map(|c| {
                format!(
                    "contains '{c}'; legal characters are ASCII letters, digits, '.', '_' and '-'"
                )
            })
    };
    match problem {
        Some(p) => Err(Error::InvalidTopic(format!("topic name '{name}' {p}"))),
        None => Ok(()),
    }
}

/// The live partition folders directly under `data_dir`, sorted by topic and partition.
pub fn partition_folders(data_dir: &Path) -> Result<Vec<PartitionFolder>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(data_dir).map_err(|e| Error::io(data_dir, e))? {
        let entry = entry.map_err(|e| Error::io(data_dir, e))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let Some((topic, partition)) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_topic_partition)
        else {
            continue;
        };
        out.push(PartitionFolder {
            topic,
            partition,
            path,
        });
    }
    out.sort();
    Ok(out)
}

/// A data dir's partition folders, those its broker serves and the strays with why.
pub type LiveAndStray = (Vec<PartitionFolder>, Vec<(PartitionFolder, String)>);

/// Why `folder` is no live partition of its KRaft data dir, whose metadata log knows the `live`
/// topics ([`cluster_metadata::live_topics`]): its topic or partition is not there, or its
/// `partition.metadata` names another topic id (an older topic of that name, deleted; a restored
/// backup). A broker moves such a folder aside (`-stray`) when it starts and serves none of it.
pub fn stray_reason(folder: &PartitionFolder, live: &LiveTopics) -> Option<String> {
    if folder.topic == cluster_metadata::CLUSTER_METADATA_TOPIC {
        return None;
    }
    let Some((id, partitions)) = live.get(&folder.topic) else {
        return Some(format!(
            "the cluster's metadata log has no topic {}",
            folder.topic
        ));
    };
    if !partitions.contains(&folder.partition) {
        return Some(format!(
            "topic {} has no partition {} in the cluster's metadata log",
            folder.topic, folder.partition
        ));
    }
    match PartitionMetadataFile::in_dir(&folder.path).read() {
        Ok(Some(own)) if own.to_string() != *id => Some(format!(
            "its partition.metadata names topic id {own}, the cluster's metadata log {id} (an \
             older topic of that name)"
        )),
        _ => None,
    }
}

/// The partition folders of `data_dir` a broker would serve, and those it would set aside as
/// strays with why ([`stray_reason`]; none without a metadata log to judge by).
pub fn live_and_stray_partition_folders(data_dir: &Path) -> Result<LiveAndStray> {
    let live = metadata_topics(data_dir);
    Ok(split_strays(partition_folders(data_dir)?, live.as_ref()))
}

/// The topics of the dir's metadata log, when it has one it can read whole. A listing goes on
/// without it where it cannot (its damage is `verify`'s to report): folders are then taken as
/// they are, as before the metadata log was read.
fn metadata_topics(data_dir: &Path) -> Option<LiveTopics> {
    cluster_metadata::live_topics(data_dir)
        .ok()
        .flatten()
        .filter(|live| !live.is_empty())
}

fn split_strays(folders: Vec<PartitionFolder>, live: Option<&LiveTopics>) -> LiveAndStray {
    let Some(live) = live else {
        return (folders, Vec::new());
    };
    let mut strays = Vec::new();
    let mut kept = Vec::new();
    for folder in folders {
        match stray_reason(&folder, live) {
            Some(why) => strays.push((folder, why)),
            None => kept.push(folder),
        }
    }
    (kept, strays)
}

/// Where a partition folder really is (symlinks followed), so its data dir is the one holding
/// it; an absolute path where it does not exist yet (a log to create).
pub fn resolved(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`) and its metadata log, with who writes
/// each: their records are the broker's own, in formats its coordinators replay on start.
const INTERNAL_TOPIC_WRITERS: [(&str, &str); 4] = [
    (
        crate::internal_topics::committed_offsets::CONSUMER_OFFSETS_TOPIC,
        "the broker's group coordinator",
    ),
    (
        "__transaction_state",
        "the broker's transaction coordinator",
    ),
    ("__share_group_state", "the broker's share coordinator"),
    (
        cluster_metadata::CLUSTER_METADATA_TOPIC,
        "the KRaft controller's Raft log",
    ),
];

/// Who alone writes `topic`, when it is one of Kafka's internal topics.
fn internal_topic_writer(topic: &str) -> Option<&'static str> {
    INTERNAL_TOPIC_WRITERS
        .iter()
        .find(|(name, _)| *name == topic)
        .map(|(_, writer)| *writer)
}

/// A writable log of an internal topic's partition in a broker's data dir is refused: what
/// else is written there the broker may not start on (a black-box tester's one record in
/// `__cluster_metadata` stopped a 4.4 broker starting). Outside a broker's dir the storage
/// layer writes them as any log (fixtures, tests).
pub fn refuse_a_writer_of_an_internal_topic(dir: &Path) -> Result<()> {
    let abs = resolved(dir);
    let (Some(name), Some(data_dir)) = (abs.file_name().and_then(|n| n.to_str()), abs.parent())
    else {
        return Ok(());
    };
    let Some(parsed) = parse_partition_dir(name) else {
        return Ok(());
    };
    match internal_topic_writer(&parsed.topic) {
        Some(writer) if data_dir.join("meta.properties").is_file() => {
            Err(Error::InvalidTopic(format!(
                "{} is a partition of Kafka's internal topic {}, which {writer} alone writes \
                 (the broker takes no producer's records there, and may not start on others); \
                 open it read-only",
                dir.display(),
                parsed.topic
            )))
        }
        _ => Ok(()),
    }
}

/// Kafka's `ReplicaManager` refuses a producer's append to an internal topic ("Cannot append
/// to internal topic"), and the metadata log takes no produce request at all: a `Producer` and
/// Spark's sink, kafkalog's producers, refuse them too, in any dir.
pub fn refuse_a_producer_of_an_internal_topic(topic: &str) -> Result<()> {
    match internal_topic_writer(topic) {
        Some(writer) => Err(Error::InvalidTopic(format!(
            "Cannot append to internal topic {topic}: {writer} alone writes it (Kafka's broker \
             refuses a producer's records there)"
        ))),
        None => Ok(()),
    }
}

/// A writable log in a broker's data dir is one its broker serves: not a folder renamed for
/// deletion, a move between log dirs or as a stray, nor a stray by the dir's metadata log
/// ([`stray_reason`]). What was written there would be deleted or set aside on its start, and
/// lost without a word (a black-box tester's appends to a `-delete` folder were taken).
fn refuse_writes_its_broker_would_not_serve(dir: &Path, data_dir: &Path) -> Result<()> {
    if !data_dir.join("meta.properties").is_file() {
        return Ok(());
    }
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let refuse = |why: String| {
        Err(Error::InvalidArgument(format!(
            "{} is not a partition its broker serves ({why}): records written there would never \
             be served; open it read-only",
            dir.display()
        )))
    };
    let Some(parsed) = parse_partition_dir(name) else {
        return Ok(());
    };
    refuse_a_writer_of_an_internal_topic(dir)?;
    if parsed.kind != PartitionDirKind::Live {
        return refuse(format!("a folder renamed {:?}", parsed.kind).to_lowercase());
    }
    let Some(live) = metadata_topics(data_dir) else {
        return Ok(());
    };
    let folder = PartitionFolder {
        topic: parsed.topic,
        partition: parsed.partition,
        path: dir.to_path_buf(),
    };
    match stray_reason(&folder, &live) {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// [`partition_folders`] less the strays of a KRaft broker's dir.
pub fn live_partition_folders(data_dir: &Path) -> Result<Vec<PartitionFolder>> {
    Ok(live_and_stray_partition_folders(data_dir)?.0)
}

/// A data dir holds partition folders; one holding segments itself is a partition folder taken
/// for a data dir (it would list no topics, saying nothing).
pub fn check_not_a_partition_folder(data_dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(data_dir).map_err(|e| Error::io(data_dir, e))? {
        let entry = entry.map_err(|e| Error::io(data_dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".log") && crate::segment::offset_from_file_name(name).is_some() {
            return Err(Error::InvalidArgument(format!(
                "{} holds Kafka segments ({name}): it is a partition folder, not a data dir; \
                 open it with Log(...), or its parent folder as the data dir",
                data_dir.display()
            )));
        }
    }
    Ok(())
}

/// Partition count of each topic of a data dir (the highest partition + 1, as a broker that
/// holds every partition of a topic has them).
pub fn topic_partition_counts(data_dir: &Path) -> Result<BTreeMap<String, i32>> {
    let live = metadata_topics(data_dir);
    let mut counts = BTreeMap::new();
    for f in split_strays(partition_folders(data_dir)?, live.as_ref()).0 {
        let c = counts.entry(f.topic).or_insert(0);
        *c = (*c).max(f.partition + 1);
    }
    // The cluster's count where its metadata log is here: partitions added later may live in
    // another log dir of the broker (or on another broker).
    if let Some(live) = live {
        for (topic, count) in counts.iter_mut() {
            if let Some(last) = live.get(topic).and_then(|(_, p)| p.last()) {
                *count = (*count).max(last + 1);
            }
        }
    }
    Ok(counts)
}

/// A broker's log dir holds `meta.properties`; its broker knows its topics from the cluster's
/// metadata, not from folders. It would take a partition folder kafkalog created for a topic (or
/// a partition) it does not know as a stray (KRaft: renamed `-stray` on restart, then deleted),
/// losing what was written there: refused, saying what to do instead.
pub(crate) fn refuse_new_partitions_beside_a_broker(data_dir: &Path, topic: &str) -> Result<()> {
    if !data_dir.join("meta.properties").is_file() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{} is a Kafka broker's log dir (it holds meta.properties): its broker knows topics and \
         partitions from the cluster's metadata, not from folders, and would delete as strays \
         the folders of topic '{topic}' created here; create the topic or its partitions through \
         the broker (kafka-topics.sh --create / --alter --partitions), then write into them",
        data_dir.display()
    )))
}

/// Whether `data_dir` is a broker's log dir (`meta.properties`) holding no cluster metadata log:
/// a ZooKeeper-mode broker's (its topics' configs and partition counts live in ZooKeeper), or one
/// of a KRaft broker's several `log.dirs` other than the one holding `__cluster_metadata-0`.
/// kafkalog then knows neither its topics' configs nor which partitions other dirs hold.
pub fn broker_dir_without_metadata(data_dir: &Path) -> bool {
    data_dir.join("meta.properties").is_file()
        && !data_dir
            .join(format!(
                "{}-0",
                crate::internal_topics::cluster_metadata::CLUSTER_METADATA_TOPIC
            ))
            .is_dir()
}

/// Whether a writer of `topic` in `data_dir` cannot know the topic's configs: a broker's dir
/// without cluster metadata ([`broker_dir_without_metadata`]) where they were not given to
/// kafkalog ([`set_topic_config`]).
fn topic_configs_unknown(data_dir: &Path, topic: &str) -> bool {
    broker_dir_without_metadata(data_dir) && !topic_config_path(data_dir, topic).is_file()
}

/// The refusal of a writer whose topic's configs are not on disk ([`topic_configs_unknown`]):
/// appending by Kafka's defaults could break the topic's own rules, and silently (a keyless
/// record in a compacted topic, which the broker's cleaner then drops; CreateTime where the
/// topic stamps LogAppendTime; another codec than its `compression.type`).
fn unknown_topic_configs(data_dir: &Path, topic: &str) -> Error {
    Error::InvalidArgument(format!(
        "{} is a Kafka broker's log dir without its cluster metadata (a ZooKeeper-mode broker's, \
         or one of a KRaft broker's several log.dirs): topic '{topic}''s configs \
         (cleanup.policy, message.timestamp.type, compression.type, ...) are not on disk here, \
         and writing by Kafka's defaults could break its rules; give them once with \
         kafkalog.Topic(data_dir, '{topic}').set_config({{...}}) (what kafka-configs.sh \
         --describe --entity-type topics --entity-name {topic} lists; {{}} for Kafka's \
         defaults), or to one Log as config=",
        data_dir.display()
    ))
}

/// Stores `topic`'s configs for kafkalog's writers (`Log`, `Producer`, Spark writes), replacing
/// those stored before, checked as `Topic.create` checks them: for a topic kafkalog created, and
/// in a broker's log dir that does not hold them ([`broker_dir_without_metadata`]). Refused where
/// the dir's cluster metadata holds the topic's configs: its broker's are the ones that apply.
pub fn set_topic_config(
    data_dir: &Path,
    topic: &str,
    configs: &BTreeMap<String, String>,
) -> Result<()> {
    validate_topic_name(topic)?;
    if !topic_partition_counts(data_dir)?.contains_key(topic) {
        return Err(Error::UnknownTopicOrPartition(format!(
            "topic '{topic}' is not in {}",
            data_dir.display()
        )));
    }
    if data_dir.join("meta.properties").is_file() && !broker_dir_without_metadata(data_dir) {
        return Err(Error::InvalidArgument(format!(
            "{} holds its broker's cluster metadata, whose configs of topic '{topic}' are the \
             ones that apply: alter them through the broker (kafka-configs.sh --alter)",
            data_dir.display()
        )));
    }
    refuse_configs_kafka_4_removed(data_dir, configs)?;
    let mut config = crate::config::LogConfig::default();
    for (k, v) in configs {
        config.set(k, v)?;
    }
    config.validate()?;
    store_topic_config(data_dir, topic, configs)
}

fn store_topic_config(
    data_dir: &Path,
    topic: &str,
    configs: &BTreeMap<String, String>,
) -> Result<()> {
    let path = topic_config_path(data_dir, topic);
    let dir = path.parent().expect("has a parent");
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let bytes = serde_json::to_vec_pretty(configs).expect("strings serialize");
    crate::group::write_atomically(&path, &bytes)
}

/// Kafka's controller refuses to create the cluster's own metadata log as a topic.
fn refuse_the_metadata_topic(topic: &str) -> Result<()> {
    if topic == crate::internal_topics::cluster_metadata::CLUSTER_METADATA_TOPIC {
        return Err(Error::InvalidArgument(format!(
            "InvalidRequest: creation of internal topic {topic} is prohibited (the cluster's \
             metadata log, which Kafka's controller alone writes)"
        )));
    }
    Ok(())
}

/// Creates the folders of a new topic's partitions (an empty log each).
pub fn create_topic(data_dir: &Path, topic: &str, partitions: i32) -> Result<()> {
    validate_topic_name(topic)?;
    refuse_the_metadata_topic(topic)?;
    refuse_new_partitions_beside_a_broker(data_dir, topic)?;
    if partitions < 1 {
        return Err(Error::InvalidPartitions(format!(
            "a topic needs at least one partition, not {partitions}"
        )));
    }
    std::fs::create_dir_all(data_dir).map_err(|e| Error::io(data_dir, e))?;
    create_partitions(
        data_dir,
        topic,
        0,
        partitions,
        &crate::config::LogConfig::default(),
    )
}

/// Kafka's `Topic.hasCollisionChars`: '.' and '_' collide in metric names.
pub fn has_collision_chars(topic: &str) -> bool {
    topic.contains('.') || topic.contains('_')
}

/// Kafka's `Topic.hasCollision` against the topics of a data dir: the existing topic a new name
/// collides with once '.' and '_' are made equal (a different name), if any.
pub fn colliding_topic(data_dir: &Path, topic: &str) -> Result<Option<String>> {
    let unify = |t: &str| t.replace('.', "_");
    let wanted = unify(topic);
    Ok(topic_partition_counts(data_dir)?
        .into_keys()
        .find(|t| t != topic && unify(t) == wanted))
}

/// Where kafkalog keeps what a broker would keep in its metadata log or internal topics (topic
/// configs, consumer groups, transactional ids) for a data dir: `.<name>.kafkalog` beside it,
/// never inside, since a broker refuses to load a data dir with folders not named
/// `<topic>-<partition>` (as the Spark writer's staging folder does).
pub fn kafkalog_meta_dir(data_dir: &Path) -> PathBuf {
    // The dir itself, whatever path reaches it: through a symlink (`/var/lib/kafka/data` linked
    // to a disk's folder) the same groups and topic configs, not a second, empty set beside
    // the link.
    let abs = std::fs::canonicalize(data_dir)
        .or_else(|_| std::path::absolute(data_dir))
        .unwrap_or_else(|_| data_dir.to_path_buf());
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = abs.parent().unwrap_or(Path::new("/"));
    parent.join(format!(".{name}.kafkalog"))
}

/// The configs of the topics kafkalog created, under the data dir's kafkalog folder.
pub const TOPIC_CONFIGS_DIR: &str = "topics";

fn topic_config_path(data_dir: &Path, topic: &str) -> PathBuf {
    kafkalog_meta_dir(data_dir)
        .join(TOPIC_CONFIGS_DIR)
        .join(format!("{topic}.json"))
}

/// The configs set on `topic` (empty when none): in a broker's KRaft data dir those its
/// metadata log holds (as `kafka-configs --describe` lists a topic's own), and those kafkalog
/// stored when it created the topic.
pub fn read_topic_config(data_dir: &Path, topic: &str) -> Result<BTreeMap<String, String>> {
    let stored = crate::internal_topics::cluster_metadata::topic_configs(data_dir, topic)?;
    with_kafkalog_topic_config(data_dir, topic, stored.unwrap_or_default())
}

/// `configs` overlaid with those kafkalog stored when it created `topic`.
fn with_kafkalog_topic_config(
    data_dir: &Path,
    topic: &str,
    mut configs: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>> {
    let path = topic_config_path(data_dir, topic);
    let stored: BTreeMap<String, String> = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::corrupt(format!(
                "{} is not a topic config file: {e}",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(Error::io(&path, e)),
    };
    configs.extend(stored);
    Ok(configs)
}

/// Whether a topic's configs turn tiered storage on (KIP-405's `remote.storage.enable`, a
/// boolean Kafka reads without regard to case).
fn remote_storage_enabled(configs: &BTreeMap<String, String>) -> bool {
    configs
        .get("remote.storage.enable")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The topics of `data_dir` that keep segments in tiered storage (their configs, as
/// [`read_topic_config`] finds them, turn `remote.storage.enable` on), from one replay of its
/// metadata log: their logs on disk are the local logs only, from Kafka's EARLIEST_LOCAL offset.
pub fn remote_storage_topics(data_dir: &Path) -> Result<BTreeSet<String>> {
    let mut configs =
        crate::internal_topics::cluster_metadata::all_topic_configs(data_dir)?.unwrap_or_default();
    let stored = kafkalog_meta_dir(data_dir).join(TOPIC_CONFIGS_DIR);
    if let Ok(entries) = std::fs::read_dir(&stored) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if let Some(topic) = name.to_str().and_then(|n| n.strip_suffix(".json")) {
                let own = configs.remove(topic).unwrap_or_default();
                configs.insert(
                    topic.to_string(),
                    with_kafkalog_topic_config(data_dir, topic, own)?,
                );
            }
        }
    }
    Ok(configs
        .into_iter()
        .filter(|(_, c)| remote_storage_enabled(c))
        .map(|(topic, _)| topic)
        .collect())
}

/// A topic config Kafka 4.0 removed, refused as a 4.x broker refuses it ("Unknown topic config
/// name") where kafkalog writes by 4.x's rules: it would change nothing there. A 3.x broker's
/// dir (a ZooKeeper-mode one given its topics' configs) takes it, and its writers apply it.
fn refuse_configs_kafka_4_removed(
    data_dir: &Path,
    configs: &BTreeMap<String, String>,
) -> Result<()> {
    const REMOVED: &str = "message.timestamp.difference.max.ms";
    if configs.contains_key(REMOVED) && !kafka_3_broker_dir(data_dir, None) {
        return Err(Error::InvalidArgument(format!(
            "InvalidConfiguration: Unknown topic config name: {REMOVED} (removed in Kafka 4.0; \
             message.timestamp.before.max.ms and message.timestamp.after.max.ms limit timestamps \
             now)"
        )));
    }
    Ok(())
}

/// `MetadataVersion.IBP_4_0_IV0`'s feature level: the first metadata version of Kafka 4.0.
const FIRST_KAFKA_4_METADATA_VERSION: i64 = 22;

/// Whether the broker of `data_dir` runs Kafka 3.x or older, whose topic configs default
/// otherwise (its timestamp limits: `LogConfig::kafka_3_timestamp_limits`): a ZooKeeper-mode
/// broker's dir (`meta.properties` version 0; ZooKeeper mode ended with 3.9), or a KRaft dir
/// whose broker registered supporting no 4.x metadata version (`max_metadata_version`, from
/// its metadata log; a 3.9 broker registers 21). A kafkalog dir, a 4.x broker's, or one of
/// several `log.dirs` (whose release the dir does not tell) keeps 4.x's stricter defaults.
fn kafka_3_broker_dir(data_dir: &Path, max_metadata_version: Option<i64>) -> bool {
    let zookeeper_mode =
        cluster_metadata::meta_property(data_dir, "version").as_deref() == Some("0");
    zookeeper_mode || max_metadata_version.is_some_and(|v| v < FIRST_KAFKA_4_METADATA_VERSION)
}

/// Kafka's defaults for a log in `data_dir`, of the release its broker runs.
fn release_defaults(data_dir: &Path) -> crate::config::LogConfig {
    crate::config::LogConfig {
        kafka_3_timestamp_limits: kafka_3_broker_dir(data_dir, None),
        ..Default::default()
    }
}

/// The refusal of a writer of a tiered topic. Its log start offset and leader epochs span the
/// segments in remote storage, which kafkalog cannot see: a writable open would move both up to
/// the local log (as for a log without remote segments), and on its next start the broker
/// deletes every remote segment below them (a black-box tester lost 25 of 27, Kafka 4.4).
fn tiered_topic_not_writable(data_dir: &Path, topic: &str) -> Error {
    Error::InvalidArgument(format!(
        "topic '{topic}' in {} keeps segments in tiered storage (remote.storage.enable=true): \
         its log start offset and leader epochs span remote segments kafkalog cannot see, and \
         writing would move them to the local log, after which the broker deletes the remote \
         segments below; kafkalog writes no tiered topic: open its partitions read-only",
        data_dir.display()
    ))
}

/// The `LogConfig` of a topic as Kafka's `LogManager` makes a log's config: Kafka's defaults,
/// overlaid with the broker's dynamic configs its metadata log holds (`kafka-configs
/// --entity-type brokers`, cluster-wide or the dir's broker's, by their broker names:
/// `log.cleanup.policy`, `log.retention.hours`, ...), then with the topic's own
/// ([`read_topic_config`]). Configs of Kafka's that change nothing kafkalog does (a newer
/// broker's, tiered storage's) are passed over. The broker's static `server.properties` is not
/// in the data dir.
pub fn topic_log_config(data_dir: &Path, topic: &str) -> Result<crate::config::LogConfig> {
    if topic_configs_unknown(data_dir, topic) {
        return Err(unknown_topic_configs(data_dir, topic));
    }
    let stored = crate::internal_topics::cluster_metadata::stored_configs(data_dir, topic)?
        .unwrap_or_default();
    let mut config = crate::config::LogConfig::default();
    for (k, v, from) in crate::config::topic_defaults_from_broker(&stored.broker)? {
        if crate::config::LogConfig::is_known(k) {
            config.set(k, &v).map_err(|e| {
                Error::InvalidArgument(format!(
                    "the dynamic broker config {from} that data dir {}'s __cluster_metadata log \
                     holds gives {k}={v}, which kafkalog cannot take: {e}",
                    data_dir.display()
                ))
            })?;
        }
    }
    config.kafka_3_timestamp_limits =
        kafka_3_broker_dir(data_dir, stored.broker_max_metadata_version);
    let topic_configs = with_kafkalog_topic_config(data_dir, topic, stored.topic)?;
    if remote_storage_enabled(&topic_configs) {
        return Err(tiered_topic_not_writable(data_dir, topic));
    }
    for (k, v) in topic_configs {
        if crate::config::LogConfig::is_known(&k) {
            // Said where it came from: the caller passed no such value.
            config.set(&k, &v).map_err(|e| {
                Error::InvalidArgument(format!(
                    "topic '{topic}' has a config its data dir {} stores (its broker's \
                     __cluster_metadata log, or Topic.create's) that kafkalog cannot take: {e}",
                    data_dir.display()
                ))
            })?;
        }
    }
    Ok(config)
}

/// The `LogConfig` of the partition folder `dir` (`<topic>-<partition>`): its topic's
/// ([`topic_log_config`], from the data dir holding it); the defaults for a folder not so named,
/// and, where the caller gives configs of its own (`given`), for a topic whose configs are not
/// on disk ([`topic_configs_unknown`]).
pub fn partition_log_config(dir: &Path, given: bool) -> Result<crate::config::LogConfig> {
    // Said first: no config given makes such a log writable.
    refuse_a_writer_of_an_internal_topic(dir)?;
    let abs = resolved(dir);
    let topic = abs
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_topic_partition)
        .map(|(topic, _)| topic);
    match (topic, abs.parent()) {
        (Some(topic), Some(data_dir)) => topic_writer_config(data_dir, &topic, given),
        (None, Some(data_dir)) => Ok(release_defaults(data_dir)),
        _ => Ok(crate::config::LogConfig::default()),
    }
}

/// The `LogConfig` a writer of `topic` in `data_dir` starts from ([`topic_log_config`]); where
/// the caller gives configs of its own (`given`) for a topic whose configs are not on disk
/// ([`topic_configs_unknown`]), Kafka's defaults (of the dir's release) for it to go over.
pub fn topic_writer_config(
    data_dir: &Path,
    topic: &str,
    given: bool,
) -> Result<crate::config::LogConfig> {
    if given && topic_configs_unknown(data_dir, topic) {
        return Ok(release_defaults(data_dir));
    }
    topic_log_config(data_dir, topic)
}

/// Kafka's CreateTopics on a data dir: validates the name (and its collision with an existing
/// topic, which Kafka refuses), the configs, stores the configs and creates the partitions.
pub fn create_topic_with_config(
    data_dir: &Path,
    topic: &str,
    partitions: i32,
    configs: &BTreeMap<String, String>,
) -> Result<()> {
    validate_topic_name(topic)?;
    refuse_the_metadata_topic(topic)?;
    if data_dir.is_dir() {
        refuse_new_partitions_beside_a_broker(data_dir, topic)?;
        refuse_an_existing_or_colliding_topic(data_dir, topic)?;
    }
    refuse_configs_kafka_4_removed(data_dir, configs)?;
    let mut config = crate::config::LogConfig::default();
    for (k, v) in configs {
        config.set(k, v)?;
    }
    config.validate()?;
    if partitions < 1 {
        return Err(Error::InvalidPartitions(format!(
            "a topic needs at least one partition, not {partitions}"
        )));
    }
    std::fs::create_dir_all(data_dir).map_err(|e| Error::io(data_dir, e))?;
    let _creating = lock_topic_changes(data_dir)?;
    // Again under the lock: another creator may have finished since.
    refuse_an_existing_or_colliding_topic(data_dir, topic)?;
    if !configs.is_empty() {
        store_topic_config(data_dir, topic, configs)?;
    }
    create_partitions(data_dir, topic, 0, partitions, &config)
}

fn refuse_an_existing_or_colliding_topic(data_dir: &Path, topic: &str) -> Result<()> {
    if topic_partition_counts(data_dir)?.contains_key(topic) {
        return Err(Error::TopicExists(format!(
            "topic '{topic}' already exists in {}",
            data_dir.display()
        )));
    }
    if let Some(other) = colliding_topic(data_dir, topic)? {
        return Err(Error::InvalidTopic(format!(
            "topic '{topic}' collides with existing topic: {other}"
        )));
    }
    Ok(())
}

/// Kafka's controller creates topics and partitions one at a time, so of two creators of a topic
/// one wins and the other is told it exists. Two processes creating one topic at once were both
/// told it was created, with the partitions of whichever wrote last (a black-box tester, 5 of
/// 5 tries): topic changes in a data dir hold an exclusive `flock` of `topics.lock` in kafkalog's
/// folder beside it, released when the change is done or its process dies. (The dir's own
/// `flock` is `LogDirLock`'s, which the new logs take.) Where that folder cannot be made (a
/// parent this user may not write), the change goes on unlocked, as before.
fn lock_topic_changes(data_dir: &Path) -> Result<Option<std::fs::File>> {
    let meta = kafkalog_meta_dir(data_dir);
    let path = meta.join("topics.lock");
    let opened = std::fs::create_dir_all(&meta).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
    });
    let handle = match opened {
        Ok(handle) => handle,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    handle.lock().map_err(|e| Error::io(&path, e))?;
    Ok(Some(handle))
}

fn create_partitions(
    data_dir: &Path,
    topic: &str,
    from: i32,
    to: i32,
    config: &crate::config::LogConfig,
) -> Result<()> {
    // Each new log waits on its own fsyncs (checkpoints, the closed segment): a few workers let
    // those waits overlap (a 200-partition topic: 6.8 s one by one).
    let next = std::sync::atomic::AtomicI32::new(from);
    let workers = (to - from).clamp(1, 8);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    loop {
                        let p = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if p >= to {
                            return Ok(());
                        }
                        open_partition(data_dir, topic, p, config)?.close()?;
                    }
                })
            })
            .collect();
        // Every worker is joined (the scope would anyway); the first error is the answer.
        let mut first_error = Ok(());
        for h in handles {
            let outcome = h.join().unwrap_or_else(|_| {
                Err(Error::IllegalState(format!(
                    "creating a partition of topic '{topic}' panicked"
                )))
            });
            if first_error.is_ok() {
                first_error = outcome;
            }
        }
        first_error
    })
}

/// The writable log of `<topic>-<partition>` under `data_dir`, created when it is missing.
fn open_partition(
    data_dir: &Path,
    topic: &str,
    partition: i32,
    config: &crate::config::LogConfig,
) -> Result<Log> {
    Log::open(
        data_dir.join(format!("{topic}-{partition}")),
        LogOptions {
            read_only: false,
            create: true,
            config: config.clone(),
            ..Default::default()
        },
    )
}

/// Kafka's CreatePartitions: grows a topic to `total` partitions (never shrinks it).
pub fn add_partitions(data_dir: &Path, topic: &str, total: i32) -> Result<i32> {
    validate_topic_name(topic)?;
    let Some(&current) = topic_partition_counts(data_dir)?.get(topic) else {
        return Err(Error::UnknownTopicOrPartition(format!(
            "topic '{topic}' is not in {}",
            data_dir.display()
        )));
    };
    if total <= current {
        return Err(Error::InvalidPartitions(format!(
            "topic '{topic}' has {current} partitions; the new count must be \
             larger, not {total} (Kafka never removes partitions)"
        )));
    }
    refuse_new_partitions_beside_a_broker(data_dir, topic)?;
    let config = topic_log_config(data_dir, topic)?;
    let _changing = lock_topic_changes(data_dir)?;
    // Again under the lock: another process may have added partitions since.
    let current = topic_partition_counts(data_dir)?
        .get(topic)
        .copied()
        .unwrap_or(current);
    if total <= current {
        return Err(Error::InvalidPartitions(format!(
            "topic '{topic}' has {current} partitions; the new count must be larger, not {total} \
             (Kafka never removes partitions)"
        )));
    }
    create_partitions(data_dir, topic, current, total, &config)?;
    Ok(total)
}

/// Removes a topic's partition folders (best effort): how a failed commit takes back the topics
/// it created.
pub fn delete_topic_folders(data_dir: &Path, topic: &str) {
    if let Ok(folders) = partition_folders(data_dir) {
        for f in folders.into_iter().filter(|f| f.topic == topic) {
            let _ = std::fs::remove_dir_all(&f.path);
        }
    }
}

/// Appends staged files of whole v2 batches (offsets relative, as a producer sends them) to
/// their partitions' logs in `data_dir`, as the leader, each log with its topic's configs
/// ([`topic_log_config`]: a topic `compression.type` rewrites the batches, LogAppendTime
/// stamps them, a compacted topic refuses keyless records, as a broker does). All or nothing:
/// when any append fails, every log already appended to is truncated back to where it was, and
/// the error is returned. Returns the records' (topic, partition, first offset, last offset)
/// per partition written.
pub fn commit_staged(
    data_dir: &Path,
    staged: &[(String, i32, PathBuf)],
) -> Result<Vec<(String, i32, i64, i64)>> {
    let mut by_partition: BTreeMap<(String, i32), Vec<&Path>> = BTreeMap::new();
    for (topic, partition, file) in staged {
        validate_topic_name(topic)?;
        refuse_a_producer_of_an_internal_topic(topic)?;
        by_partition
            .entry((topic.clone(), *partition))
            .or_default()
            .push(file);
    }
    let mut appended: Vec<(Log, i64)> = Vec::new();
    let mut written = Vec::new();
    let result = (|| -> Result<()> {
        let mut configs: BTreeMap<&str, crate::config::LogConfig> = BTreeMap::new();
        for ((topic, partition), files) in &by_partition {
            if !configs.contains_key(topic.as_str()) {
                configs.insert(topic, topic_log_config(data_dir, topic)?);
            }
            let log = open_partition(data_dir, topic, *partition, &configs[topic.as_str()])?;
            let before = log.log_end_offset();
            appended.push((log, before));
            let log = &appended.last().expect("just pushed").0;
            let mut first = None;
            let mut last = before - 1;
            for file in files {
                let records = FileRecords::open(file, false)?;
                // The stager's own file: a batch may be as large as the file (the append then
                // holds it to the topic's max.message.bytes).
                let size = records.size_in_bytes();
                let mut reader =
                    records.batches(0, size, usize::try_from(size).unwrap_or(usize::MAX));
                // Whole batches go in appends of at most a few MB, each within one segment.
                let mut chunk = Vec::new();
                loop {
                    let next = reader.next_batch()?;
                    let flush = match next {
                        Some((_, bytes)) => {
                            chunk.extend_from_slice(bytes);
                            chunk.len() >= APPEND_CHUNK_BYTES
                        }
                        None => !chunk.is_empty(),
                    };
                    if flush {
                        let info = log.append_as_leader(&chunk, log.current_leader_epoch())?;
                        first.get_or_insert(info.first_offset);
                        last = info.last_offset;
                        chunk.clear();
                    }
                    if next.is_none() {
                        break;
                    }
                }
            }
            log.flush()?;
            if let Some(first) = first {
                written.push((topic.clone(), *partition, first, last));
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            for (log, _) in appended {
                log.close()?;
            }
            Ok(written)
        }
        Err(e) => {
            for (log, before) in appended.iter().rev() {
                // Best effort: the first error is the one to report.
                let _ = log.truncate_to(*before);
                let _ = log.close();
            }
            Err(e)
        }
    }
}

/// Kafka's `LogManager.LockFileName`: a broker holds a lock on it while it runs.
pub const BROKER_LOCK_FILE: &str = ".lock";

/// Whether a live process holds the lock on a data dir's `.lock`, as a running broker does
/// (Java's `FileChannel.tryLock`, an exclusive POSIX record lock: asked with `F_GETLK`, which
/// never takes it, so a crashed broker's file, whose lock died with it, reads as free). The
/// shared locks kafkalog's writers hold there ([`lock_partition_dir`]) are not a broker's.
pub fn broker_lock_holder(data_dir: &Path) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(data_dir.join(BROKER_LOCK_FILE)).ok()?;
    // SAFETY: flock is plain data; F_GETLK only fills it in.
    let mut query: libc::flock = unsafe { std::mem::zeroed() };
    query.l_type = libc::F_WRLCK as libc::c_short;
    query.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and a pointer to a flock struct that lives across the call.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut query) };
    (rc == 0 && query.l_type == libc::F_WRLCK as libc::c_short).then_some(query.l_pid)
}

/// What a writable `Log` holds while it lives: the partition folder's one-writer lock and, in a
/// broker's data dir, a shared lock on the dir's `.lock`, so a broker started meanwhile fails its
/// own lock (Kafka's "Failed to acquire lock on file .lock") rather than write the log beside
/// this writer. Both go when it drops or the process dies.
#[derive(Debug)]
pub struct WriterLock {
    _partition_dir: std::fs::File,
    _broker_lock: Option<std::fs::File>,
    /// The process that took it: a child forked since shares the locks (they belong to the
    /// open files, which fork shares), so they cannot keep it from writing beside its parent.
    pid: u32,
}

impl WriterLock {
    /// Whether this process took the lock, rather than inherited it through `fork`.
    pub fn taken_by_this_process(&self) -> bool {
        self.pid == std::process::id()
    }

    /// The refusal of a write through a writer this process inherited through `fork`: the
    /// parent goes on writing the same files, so the child's appends would be overwritten (a
    /// black-box tester lost records both were told were written), and its closing writes (the
    /// indexes trimmed) made the parent's next append fault on its map (SIGBUS).
    pub fn refuse_in_a_fork(&self, what: &str) -> Result<()> {
        if self.taken_by_this_process() {
            return Ok(());
        }
        Err(Error::ConcurrentWriter(format!(
            "{what} was opened for writing by process {}, and this process ({}) is a child forked \
             from it: a Kafka log has one writer, so a forked child cannot write through its \
             parent's; open the log (or producer) in the child once the parent closed its own",
            self.pid,
            std::process::id()
        )))
    }
}

/// Takes a shared open-file-description lock on `data_dir`'s `.lock` (created if missing, as
/// the broker creates it; never removed, as other writers may hold it): it conflicts with the
/// exclusive POSIX lock Java's `tryLock` asks for, while every kafkalog writer of the dir shares
/// it. Only in a broker's data dir (`meta.properties`), so other folders get no `.lock`.
#[cfg(target_os = "linux")]
fn share_broker_lock(data_dir: &Path) -> Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    if !data_dir.join("meta.properties").is_file() {
        return Ok(None);
    }
    let path = data_dir.join(BROKER_LOCK_FILE);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(file) => file,
        // A data dir this user may not write (its partition folder alone lent out): the
        // running-broker check at open is all the guard there is, as before.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    // SAFETY: flock is plain data; zeroed is a whole-file lock request once its type is set.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_RDLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and a pointer to a flock struct that lives across the call.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) } != 0 {
        let e = std::io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
            return Err(Error::ConcurrentWriter(format!(
                "a Kafka broker took {} while the log was being opened; stop the broker before \
                 writing, or open the log read-only",
                path.display()
            )));
        }
        return Err(Error::io(&path, e));
    }
    Ok(Some(file))
}

#[cfg(not(target_os = "linux"))]
fn share_broker_lock(_data_dir: &Path) -> Result<Option<std::fs::File>> {
    Ok(None)
}

/// Whether anything may be writing a partition folder now: a running broker holding the data
/// dir around it, or a writable `Log` (here or in another process) holding the folder's lock.
/// Probed with a shared `flock` taken and dropped at once, so no writer is ever held up.
pub fn partition_has_writer(dir: &Path) -> bool {
    if resolved(dir)
        .parent()
        .and_then(broker_lock_holder)
        .is_some()
    {
        return true;
    }
    let Ok(handle) = std::fs::File::open(dir) else {
        return true;
    };
    !matches!(handle.try_lock_shared(), Ok(()))
}

/// Takes the one-writer lock of a partition folder for a writable `Log`: an exclusive `flock`
/// on the folder itself (no file is added, so a broker sees nothing new), released when the
/// handle drops or the process dies, so a crash never leaves the folder locked; and, in a
/// broker's data dir, a share of its `.lock` that keeps a broker from starting meanwhile.
/// Refused while a running broker holds the data dir around it.
pub fn lock_partition_dir(dir: &Path) -> Result<WriterLock> {
    let mut broker_lock = None;
    // The folder where it is: through a symlink to a broker's partition folder, the symlink's
    // parent is not the broker's dir, and a tester's writer got past both the running broker and
    // the internal-topic refusal.
    let real = resolved(dir);
    if let Some(data_dir) = real.parent() {
        if let Some(pid) = broker_lock_holder(data_dir) {
            return Err(Error::ConcurrentWriter(format!(
                "{} belongs to a running Kafka broker (process {pid} holds {}); stop the broker \
                 before writing, or open the log read-only",
                dir.display(),
                data_dir.join(BROKER_LOCK_FILE).display()
            )));
        }
        broker_lock = share_broker_lock(data_dir)?;
        refuse_writes_its_broker_would_not_serve(&real, data_dir)?;
    }
    let handle = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
    // A reader's `partition_has_writer` holds a shared lock for a moment: a writer that meets
    // one tries again for a while rather than mistaking a reader for a writer.
    let deadline = std::time::Instant::now() + WRITER_LOCK_PATIENCE;
    loop {
        match handle.try_lock() {
            Ok(()) => {
                return Ok(WriterLock {
                    _partition_dir: handle,
                    _broker_lock: broker_lock,
                    pid: std::process::id(),
                })
            }
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::ConcurrentWriter(format!(
                    "{} is already opened for writing (by another Log in this or another \
                     process); a Kafka log has one writer",
                    dir.display()
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(dir, e)),
        }
    }
}

/// How long a writable open waits out shared locks (readers' probes) before it reports another
/// writer: far longer than a probe holds one, short enough for a refusal to come at once.
const WRITER_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's controller refuses to create `__cluster_metadata` (a black-box tester found it
    /// created); the other internal topics a broker creates itself, as a user may.
    #[test]
    fn the_cluster_metadata_topic_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        for created in [
            create_topic(dir.path(), "__cluster_metadata", 1),
            create_topic_with_config(dir.path(), "__cluster_metadata", 1, &BTreeMap::new()),
        ] {
            let message = created.unwrap_err().to_string();
            assert!(message.contains("prohibited"), "{message}");
        }
        assert!(!dir.path().join("__cluster_metadata-0").exists());
        create_topic(dir.path(), "__consumer_offsets", 1).unwrap();
    }

    /// A writer in a broker's data dir holds a share of its `.lock` that the exclusive POSIX
    /// lock a starting broker asks for (Java's `tryLock`) fails on; writers of the dir's other
    /// partitions share it, and it is no broker's; a folder that is no broker's gets no `.lock`.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_writer_holds_a_share_of_the_brokers_lock() {
        use std::os::fd::AsRawFd;
        let java_try_lock = |data_dir: &Path| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(data_dir.join(BROKER_LOCK_FILE))
                .unwrap();
            // SAFETY: plain data, then a valid fd and a flock struct alive across the call.
            let mut lock: libc::flock = unsafe { std::mem::zeroed() };
            lock.l_type = libc::F_WRLCK as libc::c_short;
            lock.l_whence = libc::SEEK_SET as libc::c_short;
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) == 0 }
        };
        let dir = tempfile::tempdir().unwrap();
        let first = crate::testutil::create_log(&dir.path().join("t-0"));
        let second = crate::testutil::create_log(&dir.path().join("t-1"));
        assert!(!dir.path().join(BROKER_LOCK_FILE).exists());
        drop((first, second));
        std::fs::write(dir.path().join("meta.properties"), "node.id=1\n").unwrap();
        let writable = || LogOptions {
            read_only: false,
            ..Default::default()
        };
        let first = Log::open(dir.path().join("t-0"), writable()).unwrap();
        let second = Log::open(dir.path().join("t-1"), writable()).unwrap();
        assert_eq!(broker_lock_holder(dir.path()), None);
        assert!(
            !java_try_lock(dir.path()),
            "a broker would start under the writers"
        );
        first.close().unwrap();
        drop(first);
        assert!(!java_try_lock(dir.path()));
        second.close().unwrap();
        drop(second);
        assert!(java_try_lock(dir.path()), "the lock outlived its writers");
    }

    /// A data dir reached through a symlink keeps the groups and topic configs kafkalog keeps
    /// beside it (a black-box tester's link read `{}` and let keyless records into a compacted
    /// topic).
    #[test]
    fn a_data_dir_through_a_symlink_keeps_its_topic_configs() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("disk1");
        std::fs::create_dir(&real).unwrap();
        let link = root.path().join("data");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let config: BTreeMap<String, String> =
            [("cleanup.policy".to_owned(), "compact".to_owned())].into();
        create_topic_with_config(&real, "users", 1, &config).unwrap();
        assert_eq!(kafkalog_meta_dir(&link), kafkalog_meta_dir(&real));
        assert_eq!(read_topic_config(&link, "users").unwrap(), config);
        assert!(
            topic_log_config(&link, "users")
                .unwrap()
                .cleanup_policy_compact
        );
    }

    #[test]
    fn one_writer_per_partition_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let first = crate::testutil::create_log(&path);
        let second = Log::open(
            &path,
            LogOptions {
                read_only: false,
                ..Default::default()
            },
        );
        let err = second.expect_err("a second writer is refused").to_string();
        assert!(err.contains("one writer"), "{err}");
        // Readers are never blocked.
        Log::open(&path, LogOptions::default()).unwrap();
        first.close().unwrap();
        Log::open(
            &path,
            LogOptions {
                read_only: false,
                ..Default::default()
            },
        )
        .unwrap();
    }

    #[test]
    fn a_readers_probe_does_not_refuse_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        crate::testutil::create_log(&path).close().unwrap();
        // A probe's shared lock, held longer than any real probe holds it.
        let probe = std::fs::File::open(&path).unwrap();
        probe.lock_shared().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(probe);
        });
        let writer = Log::open(
            &path,
            LogOptions {
                read_only: false,
                ..Default::default()
            },
        );
        release.join().unwrap();
        writer
            .expect("the writer waited out the probe")
            .close()
            .unwrap();
    }

    #[test]
    fn topic_names_follow_kafka() {
        for ok in ["orders", "a.b_c-1", &"x".repeat(249)] {
            validate_topic_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "with space", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn folders_and_counts() {
        let dir = tempfile::tempdir().unwrap();
        create_topic(dir.path(), "t", 3).unwrap();
        std::fs::create_dir(dir.path().join("t-7.abc-delete")).unwrap();
        std::fs::write(
            dir.path().join("recovery-point-offset-checkpoint"),
            "0\n0\n",
        )
        .unwrap();
        let folders = partition_folders(dir.path()).unwrap();
        assert_eq!(folders.len(), 3);
        assert_eq!(topic_partition_counts(dir.path()).unwrap()["t"], 3);
    }

    #[test]
    fn a_partition_folder_is_not_taken_for_a_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        create_topic(dir.path(), "t", 1).unwrap();
        check_not_a_partition_folder(dir.path()).unwrap();
        let partition = dir.path().join("t-0");
        std::fs::write(partition.join("00000000000000000000.log"), b"").unwrap();
        let e = check_not_a_partition_folder(&partition).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(e.to_string().contains("is a partition folder"), "{e}");
        // A stray server.log is no segment.
        std::fs::write(dir.path().join("server.log"), b"").unwrap();
        check_not_a_partition_folder(dir.path()).unwrap();
    }

    /// A ZooKeeper-mode broker's log dir (or a KRaft broker's without `__cluster_metadata-0`)
    /// holds none of its topics' configs: writers refuse until they are given.
    #[test]
    fn topic_configs_of_a_broker_dir_without_metadata_are_given_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        create_topic(dir.path(), "t", 1).unwrap();
        assert!(topic_log_config(dir.path(), "t").is_ok());
        std::fs::write(
            dir.path().join("meta.properties"),
            "version=0\nbroker.id=0\n",
        )
        .unwrap();
        assert!(broker_dir_without_metadata(dir.path()));
        let e = topic_log_config(dir.path(), "t").unwrap_err();
        assert!(e.to_string().contains("set_config"), "{e}");
        let folder = dir.path().join("t-0");
        assert!(partition_log_config(&folder, false).is_err());
        // A writer given configs of its own starts from Kafka's defaults.
        assert!(
            !partition_log_config(&folder, true)
                .unwrap()
                .cleanup_policy_compact
        );
        let compact = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        set_topic_config(dir.path(), "t", &compact).unwrap();
        assert!(
            topic_log_config(dir.path(), "t")
                .unwrap()
                .cleanup_policy_compact
        );
        assert!(
            partition_log_config(&folder, true)
                .unwrap()
                .cleanup_policy_compact
        );
        assert!(set_topic_config(dir.path(), "missing", &compact).is_err());
        let bad = BTreeMap::from([("cleanup.policy".to_string(), "sometimes".to_string())]);
        assert!(set_topic_config(dir.path(), "t", &bad).is_err());
        assert!(
            topic_log_config(dir.path(), "t")
                .unwrap()
                .cleanup_policy_compact
        );
    }

    /// A tiered topic's writers would move its log start offset and leader epochs up to the
    /// local log, and its broker would then delete the remote segments below: refused.
    #[test]
    fn a_tiered_topic_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let tiered = BTreeMap::from([("remote.storage.enable".to_string(), "TRUE".to_string())]);
        create_topic_with_config(dir.path(), "t", 1, &tiered).unwrap();
        assert_eq!(
            remote_storage_topics(dir.path()).unwrap(),
            BTreeSet::from(["t".to_string()])
        );
        let e = topic_log_config(dir.path(), "t").unwrap_err();
        assert!(e.to_string().contains("tiered storage"), "{e}");
        assert!(partition_log_config(&dir.path().join("t-0"), true).is_err());
        create_topic(dir.path(), "plain", 1).unwrap();
        assert!(topic_log_config(dir.path(), "plain").is_ok());
    }

    #[test]
    fn kafkas_internal_topics_have_no_writer_but_their_broker() {
        // A tester's one Producer record in a 4.4 broker's __cluster_metadata-0 stopped the
        // broker starting ("Got key in the record when no key was expected").
        let dir = tempfile::tempdir().unwrap();
        for topic in [
            "__consumer_offsets",
            "__transaction_state",
            "__cluster_metadata",
        ] {
            let log = crate::testutil::create_log(&dir.path().join(format!("{topic}-0")));
            log.append_as_leader(&crate::testutil::batch_at(0, &[1]), 0)
                .unwrap();
        }
        for topic in [
            "__consumer_offsets",
            "__transaction_state",
            "__cluster_metadata",
        ] {
            let e = crate::producer::accumulator::TopicProducer::new(
                dir.path(),
                topic,
                Default::default(),
            )
            .err()
            .unwrap();
            assert!(matches!(e, Error::InvalidTopic(_)), "{e}");
            assert!(
                e.to_string().contains("Cannot append to internal topic"),
                "{e}"
            );
            assert!(refuse_a_producer_of_an_internal_topic(topic).is_err());
        }
        assert!(refuse_a_producer_of_an_internal_topic("__consumer_offsets_not").is_ok());
        // The storage layer writes them outside a broker's dir (tests, fixtures); in one, only
        // reads are taken.
        std::fs::write(dir.path().join("meta.properties"), "node.id=1\n").unwrap();
        for topic in [
            "__consumer_offsets",
            "__transaction_state",
            "__cluster_metadata",
        ] {
            let folder = dir.path().join(format!("{topic}-0"));
            let before = std::fs::read(folder.join("00000000000000000000.log")).unwrap();
            let options = crate::log::LogOptions {
                read_only: false,
                ..Default::default()
            };
            let e = crate::log::Log::open(&folder, options).err().unwrap();
            assert!(matches!(e, Error::InvalidTopic(_)), "{e}");
            assert!(e.to_string().contains("internal topic"), "{e}");
            let read = crate::log::Log::open(&folder, Default::default()).unwrap();
            assert_eq!(read.log_end_offset(), 1);
            let after = std::fs::read(folder.join("00000000000000000000.log")).unwrap();
            assert_eq!(before, after);
            // Nor through a symlink to the folder, whatever its name (a tester's writer got
            // through one and the broker lost its group offsets).
            let elsewhere = tempfile::tempdir().unwrap();
            for name in ["link", "t-0", &format!("{topic}-0")] {
                let link = elsewhere.path().join(name);
                std::os::unix::fs::symlink(&folder, &link).unwrap();
                let options = crate::log::LogOptions {
                    read_only: false,
                    ..Default::default()
                };
                let e = crate::log::Log::open(&link, options).err().unwrap();
                assert!(matches!(e, Error::InvalidTopic(_)), "{name}: {e}");
                assert!(partition_log_config(&link, false).is_err(), "{name}");
                std::fs::remove_file(&link).unwrap();
            }
        }
    }

    #[test]
    fn a_zookeeper_mode_dir_takes_kafka_3s_timestamp_limits() {
        let dir = tempfile::tempdir().unwrap();
        create_topic(dir.path(), "t", 1).unwrap();
        let removed = BTreeMap::from([(
            "message.timestamp.difference.max.ms".to_string(),
            "600000".to_string(),
        )]);
        // kafkalog's own dir writes by 4.x's rules, which removed the config.
        let e = set_topic_config(dir.path(), "t", &removed).unwrap_err();
        assert!(e.to_string().contains("Unknown topic config name"), "{e}");
        assert!(
            !topic_log_config(dir.path(), "t")
                .unwrap()
                .kafka_3_timestamp_limits
        );
        // A ZooKeeper-mode broker's meta.properties (version 0): Kafka 3.x or older.
        std::fs::write(
            dir.path().join("meta.properties"),
            "version=0\nbroker.id=1\ncluster.id=abc\n",
        )
        .unwrap();
        set_topic_config(dir.path(), "t", &removed).unwrap();
        let config = topic_log_config(dir.path(), "t").unwrap();
        assert!(config.kafka_3_timestamp_limits);
        assert_eq!(
            (
                config.timestamp_before_max_ms(),
                config.timestamp_after_max_ms()
            ),
            (600_000, 600_000)
        );
        set_topic_config(dir.path(), "t", &BTreeMap::new()).unwrap();
        let config = partition_log_config(&dir.path().join("t-0"), false).unwrap();
        assert_eq!(config.timestamp_after_max_ms(), i64::MAX);
    }

    #[test]
    fn no_new_topic_or_partition_in_a_brokers_log_dir() {
        // The broker would delete them as strays on restart.
        let dir = tempfile::tempdir().unwrap();
        create_topic(dir.path(), "t", 1).unwrap();
        std::fs::write(dir.path().join("meta.properties"), "node.id=1\n").unwrap();
        for e in [
            create_topic(dir.path(), "new", 1).unwrap_err(),
            create_topic_with_config(dir.path(), "new", 1, &BTreeMap::new()).unwrap_err(),
            add_partitions(dir.path(), "t", 2).unwrap_err(),
        ] {
            assert!(e.to_string().contains("broker's log dir"), "{e}");
        }
        assert_eq!(
            topic_partition_counts(dir.path()).unwrap(),
            BTreeMap::from([("t".to_string(), 1)])
        );
    }

    #[test]
    fn a_failed_commit_leaves_every_log_as_it_was() {
        use crate::record::builder::{BatchBuilder, BatchOptions};
        let dir = tempfile::tempdir().unwrap();
        create_topic(dir.path(), "t", 2).unwrap();
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.append(1, None, Some(b"v"), &[]).unwrap();
        let good = dir.path().join("good.batches");
        std::fs::write(&good, b.build().unwrap()).unwrap();
        let bad = dir.path().join("bad.batches");
        std::fs::write(&bad, b"not a batch at all, just bytes").unwrap();
        let staged = vec![
            ("t".to_string(), 0, good.clone()),
            ("t".to_string(), 1, bad),
        ];
        assert!(commit_staged(dir.path(), &staged).is_err());
        for p in 0..2 {
            let log = Log::open(dir.path().join(format!("t-{p}")), LogOptions::default()).unwrap();
            assert_eq!(log.log_end_offset(), 0, "partition {p} rolled back");
        }
        let ok = commit_staged(dir.path(), &[("t".to_string(), 0, good)]).unwrap();
        assert_eq!(ok, vec![("t".to_string(), 0, 0, 0)]);
    }
}
