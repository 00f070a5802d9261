//! KRaft `__cluster_metadata` records: Kafka's `MetadataRecordSerde` framing (frame version,
//! record type and version as unsigned varints, then the record) over the metadata record
//! definitions, and what `DumpLogSegments --cluster-metadata-decoder` prints
//! (`payload: {"type":"TOPIC_RECORD","version":0,"data":{...}}`). Control records (leader
//! changes, snapshot headers, voters) are the dump's own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::{json, Value};

use crate::datadir::partition_folders;
use crate::error::Error;
use crate::log::{FetchIsolation, Log, LogOptions};
use crate::record::batch::DEFAULT_MAX_DECOMPRESSED_BYTES;
use crate::record::file_records::FileRecords;

use super::message::{find, read_message, to_jackson_string, Family, Kind, Reader};
use super::{DecodeError, ParsedRecord};

/// `ApiMessageAndVersion`'s frame version.
const FRAME_VERSION: i16 = 1;

/// One decoded metadata record.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataRecord {
    pub api_key: i16,
    /// `MetadataRecordType`'s name, e.g. `TOPIC_RECORD`.
    pub type_name: String,
    pub version: i16,
    pub data: Value,
}

/// Kafka's `MessageGenerator.toSnakeCase(name).toUpperCase()`.
fn enum_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut prev_capital = true;
    for c in name.chars() {
        if c.is_uppercase() {
            if !prev_capital {
                out.push('_');
            }
            prev_capital = true;
        } else {
            prev_capital = false;
        }
        out.extend(c.to_uppercase());
    }
    out
}

pub fn decode(value: &[u8]) -> Result<MetadataRecord, DecodeError> {
    let mut r = Reader::new(value);
    // Kafka's `unsignedIntToShort`: the varint read as a Java int (so one past 2^31 is
    // negative, and cast), refused only above Short.MAX_VALUE.
    let short = |r: &mut Reader<'_>, what: &str| -> Result<i16, DecodeError> {
        let v = r
            .unsigned_varint()
            .map_err(|_| DecodeError::Other(format!("Error while reading {what}")))?
            as i32;
        if v > i32::from(i16::MAX) {
            return Err(DecodeError::Other(format!(
                "Value for {what} was too large."
            )));
        }
        Ok(v as i16)
    };
    let frame = short(&mut r, "frame version")?;
    if frame == 0 {
        return Err(DecodeError::Other("Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.".into()));
    } else if frame != FRAME_VERSION {
        return Err(DecodeError::Other(format!("Could not deserialize metadata record due to unknown frame version {frame}(only frame version {FRAME_VERSION} is supported)")));
    }
    let api_key = short(&mut r, "type")?;
    let version = short(&mut r, "version")?;
    let spec = find(Family::Metadata, Kind::Metadata, api_key)
        .ok_or_else(|| DecodeError::Other(format!("Unknown metadata id {api_key}")))?;
    let data = read_message(spec, version, &mut r).map_err(|e| {
        DecodeError::Other(format!(
            "Failed to deserialize record with type {api_key}: {e}"
        ))
    })?;
    if r.remaining() > 0 {
        return Err(DecodeError::Other(format!(
            "Found {} byte(s) of garbage after {api_key}",
            r.remaining()
        )));
    }
    Ok(MetadataRecord {
        api_key,
        type_name: enum_name(spec.name),
        version,
        data,
    })
}

/// `ClusterMetadataLogMessageParser.parse`: no key, the record as the payload.
pub fn parse_for_dump(value: Option<&[u8]>, offset: i64) -> ParsedRecord {
    let result = value
        // Kafka's serde reads a null value as an empty buffer: it fails at the frame version.
        .ok_or_else(|| DecodeError::Other("Error while reading frame version".into()))
        .and_then(decode);
    let payload_json = match result {
        Ok(m) => json!({"type": m.type_name, "version": m.version, "data": m.data}),
        Err(e) => {
            let text = format!("Error at {offset}, skipping. {e}");
            return ParsedRecord {
                key: None,
                payload: Some(text.clone()),
                key_json: Value::Null,
                payload_json: json!({ "error": text }),
            };
        }
    };
    ParsedRecord {
        key: None,
        payload: Some(to_jackson_string(&payload_json)),
        key_json: Value::Null,
        payload_json,
    }
}

pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// The topics a KRaft data dir's metadata log knows, with their partition numbers, as a broker
/// replays it (`MetadataLoader`): the latest snapshot (`<offset>-<epoch>.checkpoint`), then the
/// log from the snapshot's end. `None` when the dir holds no `__cluster_metadata-0`, or when its
/// log starts past the snapshot (records missing: the answer would be a guess).
pub fn topic_partitions(
    data_dir: &Path,
) -> crate::error::Result<Option<HashMap<String, BTreeSet<i32>>>> {
    Ok(replay(data_dir)?.map(TopicReplay::by_name))
}

/// Topics by name: their id and partition numbers.
pub type LiveTopics = HashMap<String, (String, BTreeSet<i32>)>;

/// The topics a KRaft data dir's metadata log knows, by name: their id (as Kafka's
/// `Uuid.toString` prints it, as `partition.metadata` holds it) and partition numbers; as
/// [`topic_partitions`], `None` without a metadata log or when its records before its start are
/// gone.
pub fn live_topics(data_dir: &Path) -> crate::error::Result<Option<LiveTopics>> {
    Ok(replay(data_dir)?.map(TopicReplay::with_ids))
}

/// The configs set on `topic` in a KRaft data dir's metadata log (`kafka-configs --alter` or
/// `CreateTopics`' configs: CONFIG_RECORDs of resource type TOPIC, a null value deleting one),
/// replayed as [`topic_partitions`] replays topics. Empty when the dir has no metadata log or
/// the topic has no configs of its own; `None` when the log's records before its start are gone.
/// A broker's own defaults (its `server.properties`) are not in the data dir.
pub fn topic_configs(
    data_dir: &Path,
    topic: &str,
) -> crate::error::Result<Option<BTreeMap<String, String>>> {
    Ok(stored_configs(data_dir, topic)?.map(|c| c.topic))
}

/// What a KRaft data dir's metadata log holds of the configs a log of `topic` runs with.
#[derive(Debug, Default, PartialEq)]
pub struct StoredConfigs {
    /// Those set on the topic ([`topic_configs`]).
    pub topic: BTreeMap<String, String>,
    /// The dynamic broker configs (`kafka-configs --entity-type brokers`, CONFIG_RECORDs of
    /// resource type BROKER) of the broker whose dir it is: the cluster-wide defaults
    /// (`--entity-default`) overlaid with its own (`--entity-name <node.id>`, the id in the dir's
    /// `meta.properties`), as a broker resolves each of its configs.
    pub broker: BTreeMap<String, String>,
    /// The highest `metadata.version` (a feature level) the broker whose dir it is registered
    /// as supporting (its latest REGISTER_BROKER_RECORD): what tells its Kafka release.
    pub broker_max_metadata_version: Option<i64>,
}

/// [`StoredConfigs`] of `topic` in `data_dir`, from one replay of its metadata log; empty
/// without a metadata log, `None` when the log's records before its start are gone.
pub fn stored_configs(data_dir: &Path, topic: &str) -> crate::error::Result<Option<StoredConfigs>> {
    if !data_dir
        .join(format!("{CLUSTER_METADATA_TOPIC}-0"))
        .is_dir()
    {
        return Ok(Some(StoredConfigs::default()));
    }
    let Some(mut replay) = replay(data_dir)? else {
        return Ok(None);
    };
    let mut broker = replay.broker_configs.remove("").unwrap_or_default();
    let mut broker_max_metadata_version = None;
    if let Some(id) = node_id(data_dir) {
        broker.extend(replay.broker_configs.remove(&id).unwrap_or_default());
        broker_max_metadata_version = replay.broker_max_metadata_version.get(&id).copied();
    }
    Ok(Some(StoredConfigs {
        topic: replay.configs.remove(topic).unwrap_or_default(),
        broker,
        broker_max_metadata_version,
    }))
}

/// The configs set on every topic of a KRaft data dir's metadata log, from one replay (see
/// [`topic_configs`]); empty without a metadata log, `None` when its records before its start
/// are gone.
pub fn all_topic_configs(
    data_dir: &Path,
) -> crate::error::Result<Option<BTreeMap<String, BTreeMap<String, String>>>> {
    if !data_dir
        .join(format!("{CLUSTER_METADATA_TOPIC}-0"))
        .is_dir()
    {
        return Ok(Some(BTreeMap::new()));
    }
    Ok(replay(data_dir)?.map(|r| r.configs.into_iter().collect()))
}

/// The broker's id in the data dir's `meta.properties` (`node.id`, or a ZooKeeper-era
/// `broker.id`).
fn node_id(data_dir: &Path) -> Option<String> {
    meta_property(data_dir, "node.id").or_else(|| meta_property(data_dir, "broker.id"))
}

/// `key`'s value in the data dir's `meta.properties`, if it has one.
pub(crate) fn meta_property(data_dir: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(data_dir.join("meta.properties")).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// The metadata log of `data_dir` replayed (see [`topic_partitions`]).
fn replay(data_dir: &Path) -> crate::error::Result<Option<TopicReplay>> {
    let Some(folder) = partition_folders(data_dir)?
        .into_iter()
        .find(|f| f.topic == CLUSTER_METADATA_TOPIC && f.partition == 0)
    else {
        return Ok(None);
    };
    let mut replay = TopicReplay::default();
    let snapshot = std::fs::read_dir(&folder.path)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".checkpoint")?;
            let offset: i64 = stem.split('-').next()?.parse().ok()?;
            Some((offset, e.path()))
        })
        .max_by_key(|(offset, _)| *offset);
    let mut applied_to = 0;
    let snapshot_found = snapshot.is_some();
    if let Some((end_offset, path)) = snapshot {
        let records = FileRecords::open(&path, false)?;
        let mut scratch = Vec::new();
        records.for_each_batch(
            0,
            records.size_in_bytes(),
            DEFAULT_MAX_DECOMPRESSED_BYTES,
            &mut |_, batch| {
                if !batch.is_control() {
                    batch
                        .record_iter(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?
                        .try_for_each_record(|r| replay.apply(r.value, &path))?;
                }
                Ok(true)
            },
        )?;
        applied_to = end_offset;
    }
    let has_segments = std::fs::read_dir(&folder.path)?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().ends_with(".log"));
    if !has_segments {
        // A snapshot copied without its log: what it holds, up to its end offset.
        return Ok(snapshot_found.then_some(replay));
    }
    let log = Log::open(&folder.path, LogOptions::default())?;
    if log.log_start_offset() > applied_to {
        return Ok(None);
    }
    let mut failure = None;
    log.for_each_batch(
        Some(applied_to),
        None,
        FetchIsolation::LogEnd,
        true,
        &mut |_, batch, records, range| {
            if !batch.is_control() {
                for r in &records[range] {
                    if let Err(e) = replay.apply(r.value, &folder.path) {
                        failure = Some(e);
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        },
    )?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Some(replay))
}

/// Topics by id, their partitions and their configs by topic name, as TOPIC_RECORD,
/// PARTITION_RECORD, CONFIG_RECORD and REMOVE_TOPIC_RECORD leave them.
#[derive(Default)]
struct TopicReplay {
    names: HashMap<String, String>,
    partitions: HashMap<String, BTreeSet<i32>>,
    configs: HashMap<String, BTreeMap<String, String>>,
    /// Dynamic broker configs by broker id, `""` holding the cluster-wide defaults.
    broker_configs: HashMap<String, BTreeMap<String, String>>,
    /// The highest `metadata.version` each broker (by id) registered as supporting.
    broker_max_metadata_version: HashMap<String, i64>,
}

/// `ConfigResource.Type.TOPIC`'s id in a CONFIG_RECORD's `resourceType`.
const TOPIC_RESOURCE_TYPE: i64 = 2;
/// `ConfigResource.Type.BROKER`'s.
const BROKER_RESOURCE_TYPE: i64 = 4;

impl TopicReplay {
    fn apply(&mut self, value: Option<&[u8]>, from: &Path) -> crate::error::Result<()> {
        let Some(value) = value else { return Ok(()) };
        let record = decode(value)
            .map_err(|e| Error::corrupt(format!("{}: a metadata record: {e}", from.display())))?;
        let field = |name: &str| record.data.get(name).cloned().unwrap_or(Value::Null);
        let topic_id = field("topicId").as_str().unwrap_or_default().to_owned();
        match record.type_name.as_str() {
            "TOPIC_RECORD" => {
                if let Some(name) = field("name").as_str() {
                    self.names.insert(topic_id, name.to_owned());
                }
            }
            "PARTITION_RECORD" => {
                if let Some(p) = field("partitionId").as_i64() {
                    self.partitions
                        .entry(topic_id)
                        .or_default()
                        .insert(p as i32);
                }
            }
            "CONFIG_RECORD" => {
                let text = |name: &str| record.data.get(name).and_then(Value::as_str);
                let (Some(resource), Some(name)) = (text("resourceName"), text("name")) else {
                    return Ok(());
                };
                let configs = match field("resourceType").as_i64() {
                    Some(TOPIC_RESOURCE_TYPE) => &mut self.configs,
                    Some(BROKER_RESOURCE_TYPE) => &mut self.broker_configs,
                    _ => return Ok(()),
                };
                let configs = configs.entry(resource.to_owned()).or_default();
                match text("value") {
                    Some(value) => configs.insert(name.to_owned(), value.to_owned()),
                    None => configs.remove(name),
                };
            }
            "REGISTER_BROKER_RECORD" => {
                let features = field("features");
                let max = features.as_array().into_iter().flatten().find_map(|f| {
                    (f.get("name")?.as_str()? == "metadata.version")
                        .then(|| f.get("maxSupportedVersion")?.as_i64())
                        .flatten()
                });
                if let (Some(id), Some(max)) = (field("brokerId").as_i64(), max) {
                    self.broker_max_metadata_version.insert(id.to_string(), max);
                }
            }
            "REMOVE_TOPIC_RECORD" => {
                // A deleted topic's configs go with it (`ConfigurationsDelta.deleteTopicConfigs`).
                if let Some(name) = self.names.remove(&topic_id) {
                    self.configs.remove(&name);
                }
                self.partitions.remove(&topic_id);
            }
            _ => {}
        }
        Ok(())
    }

    fn with_ids(mut self) -> LiveTopics {
        self.names
            .into_iter()
            .map(|(id, name)| {
                let partitions = self.partitions.remove(&id).unwrap_or_default();
                (name, (id, partitions))
            })
            .collect()
    }

    fn by_name(mut self) -> HashMap<String, BTreeSet<i32>> {
        self.names
            .into_iter()
            .map(|(id, name)| (name, self.partitions.remove(&id).unwrap_or_default()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metadata record's value: frame version 1, `api_key`, version 0, then `body`.
    fn frame(api_key: u8, body: &[u8]) -> Vec<u8> {
        [&[1, api_key, 0][..], body, &[0]].concat()
    }

    fn compact_string(s: Option<&str>) -> Vec<u8> {
        match s {
            None => vec![0],
            Some(s) => [&[s.len() as u8 + 1][..], s.as_bytes()].concat(),
        }
    }

    fn topic_value(name: &str, id: u8) -> Vec<u8> {
        let mut body = compact_string(Some(name));
        body.extend_from_slice(&[id; 16]);
        frame(2, &body)
    }

    fn config_value(resource_type: u8, resource: &str, name: &str, value: Option<&str>) -> Vec<u8> {
        let body = [
            vec![resource_type],
            compact_string(Some(resource)),
            compact_string(Some(name)),
            compact_string(value),
        ]
        .concat();
        frame(4, &body)
    }

    /// A topic's configs are what CONFIG_RECORDs of resource type TOPIC left set, a null value
    /// deleting one; a broker's configs (type 4) are not a topic's; a deleted topic's configs go
    /// with it, so a topic made again by that name starts without them. The log config of a
    /// topic takes them, passing over the configs kafkalog does not model.
    #[test]
    fn topic_configs_replay_config_records() {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::testutil::create_log(&dir.path().join("__cluster_metadata-0"));
        let values = [
            topic_value("t", 1),
            config_value(2, "t", "compression.type", Some("lz4")),
            config_value(2, "t", "retention.ms", Some("5")),
            config_value(2, "t", "min.insync.replicas", Some("2")),
            config_value(2, "t", "compression.zstd.level", Some("9")),
            config_value(2, "t", "retention.ms", None),
            config_value(4, "", "message.timestamp.type", Some("LogAppendTime")),
            topic_value("gone", 2),
            config_value(2, "gone", "segment.ms", Some("7")),
            frame(9, &[2; 16]), // REMOVE_TOPIC_RECORD of "gone"
            topic_value("gone", 3),
        ];
        let mut builder = crate::record::builder::BatchBuilder::new(Default::default());
        for value in &values {
            builder.append(1, None, Some(value), &[]).unwrap();
        }
        log.append_as_leader(&builder.build().unwrap(), 0).unwrap();
        log.close().unwrap();

        let configs = |topic| topic_configs(dir.path(), topic).unwrap().unwrap();
        let expected: BTreeMap<String, String> = [
            ("compression.type", "lz4"),
            ("compression.zstd.level", "9"),
            ("min.insync.replicas", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(configs("t"), expected);
        assert_eq!(configs("gone"), BTreeMap::new());
        assert_eq!(configs("never"), BTreeMap::new());
        assert_eq!(
            crate::datadir::read_topic_config(dir.path(), "t").unwrap(),
            expected
        );
        let config = crate::datadir::topic_log_config(dir.path(), "t").unwrap();
        assert_eq!(
            config.compression_type,
            Some(crate::record::codec::Compression::Lz4)
        );
        assert_eq!(
            config.message_timestamp_type,
            crate::record::record::TimestampType::CreateTime
        );
        // A folder without a metadata log: no configs, nothing read.
        let plain = tempfile::tempdir().unwrap();
        assert_eq!(
            topic_configs(plain.path(), "t").unwrap(),
            Some(BTreeMap::new())
        );
    }

    fn partition_value(partition: i32, id: u8) -> Vec<u8> {
        let body = [
            &partition.to_be_bytes()[..],
            &[id; 16],
            &[1, 1, 1, 1], // replicas, isr, removing, adding: empty compact arrays
            &0i32.to_be_bytes(),
            &0i32.to_be_bytes(),
            &0i32.to_be_bytes(),
        ]
        .concat();
        frame(3, &body)
    }

    /// A broker serves only the partitions its metadata log lists, of the topic id it lists:
    /// another folder of the name (an older topic's, deleted, from a backup; a partition the
    /// topic does not have) is a stray it sets aside. kafkalog listed a tester's restored
    /// `st-1` of a deleted topic as a live partition of the new `st`.
    #[test]
    fn folders_the_metadata_log_does_not_list_are_strays() {
        use crate::log::checkpoint::{PartitionMetadataFile, Uuid};
        let dir = tempfile::tempdir().unwrap();
        let log = crate::testutil::create_log(&dir.path().join("__cluster_metadata-0"));
        let values = [
            topic_value("st", 1),
            partition_value(0, 1),
            topic_value("wide", 2),
            partition_value(0, 2),
            partition_value(1, 2),
            partition_value(2, 2),
        ];
        let mut builder = crate::record::builder::BatchBuilder::new(Default::default());
        for value in &values {
            builder.append(1, None, Some(value), &[]).unwrap();
        }
        log.append_as_leader(&builder.build().unwrap(), 0).unwrap();
        log.close().unwrap();
        let folder = |name: &str, id: Option<u8>| {
            let path = dir.path().join(name);
            std::fs::create_dir(&path).unwrap();
            if let Some(id) = id {
                let id = Uuid(u128::from_be_bytes([id; 16]));
                PartitionMetadataFile::in_dir(&path).write(id).unwrap();
            }
        };
        folder("st-0", Some(1));
        folder("st-1", Some(9)); // the deleted topic's second partition
        folder("wide-0", Some(7)); // an older "wide"
        folder("wide-1", None); // no partition.metadata: not judged by id
        folder("gone-0", None);
        let (live, strays) = crate::datadir::live_and_stray_partition_folders(dir.path()).unwrap();
        let names = |v: Vec<String>| v.join(" ");
        assert_eq!(
            names(
                live.iter()
                    .map(|f| format!("{}-{}", f.topic, f.partition))
                    .collect()
            ),
            "__cluster_metadata-0 st-0 wide-1"
        );
        let why: Vec<String> = strays
            .iter()
            .map(|(f, why)| format!("{}-{}: {why}", f.topic, f.partition))
            .collect();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why[0].starts_with("gone-0: the cluster's metadata log has no topic gone"));
        assert!(why[1].starts_with("st-1: topic st has no partition 1"));
        assert!(why[2].starts_with("wide-0: its partition.metadata names topic id"));
        // Partition counts are the cluster's: "wide" has 3 wherever they live.
        let counts = crate::datadir::topic_partition_counts(dir.path()).unwrap();
        assert_eq!(counts.get("st"), Some(&1));
        assert_eq!(counts.get("wide"), Some(&3));
        assert_eq!(counts.get("gone"), None);
        // In a broker's dir, a stray or renamed folder is not opened for writing.
        std::fs::write(dir.path().join("meta.properties"), "version=1\nnode.id=1\n").unwrap();
        folder("st-1.0123456789abcdef0123456789abcdef-delete", None);
        let writable = |name: &str| {
            crate::log::Log::open(
                dir.path().join(name),
                crate::log::LogOptions {
                    read_only: false,
                    create: true,
                    ..Default::default()
                },
            )
        };
        for name in [
            "st-1",
            "gone-0",
            "st-1.0123456789abcdef0123456789abcdef-delete",
        ] {
            let Err(err) = writable(name) else {
                panic!("{name} opened for writing")
            };
            assert!(
                err.to_string()
                    .contains("is not a partition its broker serves"),
                "{name}: {err}"
            );
        }
        writable("st-0").unwrap().close().unwrap();
    }

    /// Dynamic broker configs (`kafka-configs --entity-type brokers`) are the defaults of a
    /// topic that does not set its own, by their broker names and units (Kafka's
    /// `ServerTopicConfigSynonyms`): the cluster-wide ones overlaid with the dir's broker's own
    /// (its `meta.properties` id), never another broker's.
    #[test]
    fn dynamic_broker_configs_are_the_defaults_of_a_topics_log_config() {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::testutil::create_log(&dir.path().join("__cluster_metadata-0"));
        std::fs::write(dir.path().join("meta.properties"), "version=1\nnode.id=1\n").unwrap();
        let values = [
            topic_value("plain", 1),
            topic_value("own", 2),
            config_value(2, "own", "cleanup.policy", Some("delete")),
            config_value(2, "own", "retention.ms", Some("5")),
            config_value(4, "", "log.cleanup.policy", Some("compact")),
            config_value(4, "", "log.retention.hours", Some("2")),
            config_value(4, "", "message.max.bytes", Some("2000")),
            config_value(4, "", "log.segment.bytes", Some("99999999")),
            config_value(4, "", "log.segment.bytes", None),
            // The dir's broker's own: its minutes come before the cluster's hours.
            config_value(4, "1", "log.retention.minutes", Some("3")),
            config_value(4, "2", "log.segment.delete.delay.ms", Some("7")),
        ];
        let mut builder = crate::record::builder::BatchBuilder::new(Default::default());
        for value in &values {
            builder.append(1, None, Some(value), &[]).unwrap();
        }
        log.append_as_leader(&builder.build().unwrap(), 0).unwrap();
        log.close().unwrap();

        let defaults = crate::config::LogConfig::default();
        let plain = crate::datadir::topic_log_config(dir.path(), "plain").unwrap();
        assert!(plain.cleanup_policy_compact);
        assert_eq!(plain.retention_ms, 3 * 60_000);
        assert_eq!(plain.max_message_bytes, 2000);
        assert_eq!(plain.segment_bytes, defaults.segment_bytes);
        assert_eq!(plain.file_delete_delay_ms, defaults.file_delete_delay_ms);
        // The topic's own configs win; `read_topic_config` lists only them, as
        // `kafka-configs --describe` lists a topic's.
        let own = crate::datadir::topic_log_config(dir.path(), "own").unwrap();
        assert!(!own.cleanup_policy_compact);
        assert_eq!((own.retention_ms, own.max_message_bytes), (5, 2000));
        assert_eq!(
            crate::datadir::read_topic_config(dir.path(), "plain").unwrap(),
            BTreeMap::new()
        );
        // Without its broker's id, a dir takes the cluster-wide configs alone.
        std::fs::remove_file(dir.path().join("meta.properties")).unwrap();
        let plain = crate::datadir::topic_log_config(dir.path(), "plain").unwrap();
        assert_eq!(plain.retention_ms, 2 * 3_600_000);
        // A negative time in hours or minutes is unlimited, -1, as Kafka's broker reads it.
        let broker: BTreeMap<String, String> =
            [("log.retention.hours".to_owned(), "-1".to_owned())].into();
        assert_eq!(
            crate::config::topic_defaults_from_broker(&broker).unwrap(),
            vec![("retention.ms", "-1".to_owned(), "log.retention.hours")]
        );
    }

    #[test]
    fn topic_record() {
        // frame 1, TopicRecord (2), version 0, name "t", topicId, no tags.
        let mut v = vec![1, 2, 0, 2, b't'];
        v.extend_from_slice(&[0u8; 15]);
        v.push(1);
        v.push(0);
        let p = parse_for_dump(Some(&v), 3);
        assert_eq!(
            p.payload.as_deref(),
            Some(
                r#"{"type":"TOPIC_RECORD","version":0,"data":{"name":"t","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}"#
            )
        );
        assert_eq!(
            enum_name("ZkMigrationStateRecord"),
            "ZK_MIGRATION_STATE_RECORD"
        );
        let bad = parse_for_dump(Some(&[1, 2, 0, 9]), 4);
        assert!(bad
            .payload
            .unwrap()
            .starts_with("Error at 4, skipping. Failed to deserialize record with type 2"));
        for empty in [None, Some(&[][..])] {
            assert_eq!(
                parse_for_dump(empty, 6).payload.as_deref(),
                Some("Error at 6, skipping. Error while reading frame version")
            );
        }
        // Frame versions past a short are Kafka's `unsignedIntToShort` error (a black-box tester
        // dumped a topic of JSON values: '{' reads as frame version 123, then 1605760 and
        // others); one past 2^31 wraps negative as a Java int and is an unknown version.
        assert_eq!(
            parse_for_dump(Some(&[0x80, 0x80, 0x62]), 0)
                .payload
                .as_deref(),
            Some("Error at 0, skipping. Value for frame version was too large.")
        );
        assert_eq!(
            parse_for_dump(Some(&[0xfb, 0xff, 0xff, 0xff, 0x0f]), 0).payload.as_deref(),
            Some("Error at 0, skipping. Could not deserialize metadata record due to unknown frame version -5(only frame version 1 is supported)")
        );
        let garbage = [v.clone(), vec![0]].concat();
        assert_eq!(
            parse_for_dump(Some(&garbage), 5).payload.as_deref(),
            Some("Error at 5, skipping. Found 1 byte(s) of garbage after 2")
        );
    }
}
