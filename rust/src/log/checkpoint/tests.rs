use super::*;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn offset_checkpoint_round_trip_and_exact_bytes() {
    let dir = tmp();
    let f = OffsetCheckpointFile::in_log_dir(dir.path(), RECOVERY_POINT_CHECKPOINT_FILE);
    assert!(f.read().unwrap().is_empty(), "missing file reads as empty");
    let mut m = OffsetMap::new();
    m.insert(("my-topic".into(), 3), 120);
    m.insert(("__consumer_offsets".into(), 0), 0);
    f.write(&m).unwrap();
    let text = fs::read_to_string(f.path()).unwrap();
    assert_eq!(text, "0\n2\n__consumer_offsets 0 0\nmy-topic 3 120\n");
    assert_eq!(f.read().unwrap(), m);
    assert!(!dir
        .path()
        .join("recovery-point-offset-checkpoint.tmp")
        .exists());

    f.update("my-topic", 3, Some(200)).unwrap();
    f.update("other", 1, Some(5)).unwrap();
    f.update("__consumer_offsets", 0, None).unwrap();
    let got = f.read().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[&("my-topic".to_string(), 3)], 200);
    assert_eq!(got[&("other".to_string(), 1)], 5);
}

#[test]
fn parses_broker_written_checkpoint() {
    // Verbatim from a Kafka 4.4.0 broker's log dir (HashMap order, '\n' line ends).
    let text = "0\n3\n__transaction_state 0 10\nmy-topic.x 1 2\nmy-topic.x 0 31\n";
    let got: Vec<TopicPartitionOffset> = CheckpointFile::parse(Path::new("x"), 0, text).unwrap();
    assert_eq!(
        got[2],
        TopicPartitionOffset {
            topic: "my-topic.x".into(),
            partition: 0,
            offset: 31
        }
    );
    let dir = tmp();
    fs::write(dir.path().join(REPLICATION_OFFSET_CHECKPOINT_FILE), text).unwrap();
    let f = OffsetCheckpointFile::in_log_dir(dir.path(), REPLICATION_OFFSET_CHECKPOINT_FILE);
    let map = f.read().unwrap();
    assert_eq!(map[&("__transaction_state".to_string(), 0)], 10);
    // Its log-start-offset-checkpoint with no entries.
    assert!(
        CheckpointFile::parse::<TopicPartitionOffset>(Path::new("x"), 0, "0\n0\n")
            .unwrap()
            .is_empty()
    );
    // Kafka's `\s+` split accepts runs of spaces and tabs between fields.
    let got: Vec<TopicPartitionOffset> =
        CheckpointFile::parse(Path::new("x"), 0, "0\n1\nt  2\t9\n").unwrap();
    assert_eq!(got[0].offset, 9);
    // An empty file and a version-only file are empty, as Kafka reads them.
    assert!(
        CheckpointFile::parse::<TopicPartitionOffset>(Path::new("x"), 0, "")
            .unwrap()
            .is_empty()
    );
    assert!(
        CheckpointFile::parse::<TopicPartitionOffset>(Path::new("x"), 0, "0\n")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn malformed_checkpoints_name_file_and_line() {
    let p = Path::new("/logs/recovery-point-offset-checkpoint");
    let err = |text: &str| {
        CheckpointFile::parse::<TopicPartitionOffset>(p, 0, text)
            .unwrap_err()
            .to_string()
    };
    let e = err("1\n0\n");
    assert!(
        e.contains("unrecognised version 1") && e.contains("recovery-point-offset-checkpoint"),
        "{e}"
    );
    assert!(err("x\n").contains("line 1"));
    assert!(err("0\nzz\n").contains("line 2"));
    assert!(err("0\n-1\n").contains("line 2"));
    let e = err("0\n2\nt 0 1\nt 1\n");
    assert!(e.contains("line 4") && e.contains("\"t 1\""), "{e}");
    assert!(err("0\n1\n t 0 1\n").contains("line 3"));
    assert!(err("0\n1\nt x 1\n").contains("line 3"));
    assert!(err("0\n1\n\n").contains("line 3"));
    let e = err("0\n3\nt 0 1\n");
    assert!(
        e.contains("expected 3 entries") && e.contains("found 1"),
        "{e}"
    );
    // A huge count is just a mismatch, never an allocation.
    assert!(err("0\n2147483647\nt 0 1\n").contains("expected 2147483647"));
}

#[test]
fn uuid_base64url() {
    // Kafka's Uuid(0x123..., ...) renders as unpadded base64url of the 16 big-endian bytes.
    let id = Uuid(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
    assert_eq!(id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
    assert_eq!(Uuid::parse("ASNFZ4mrze_-3LqYdlQyEA"), Some(id));
    assert_eq!(Uuid::parse("AAAAAAAAAAAAAAAAAAAAAA"), Some(Uuid::ZERO));
    assert_eq!(
        Uuid::parse("ASNFZ4mrze_-3LqYdlQyEB"),
        None,
        "non-zero pad bits"
    );
    assert_eq!(Uuid::parse("ASNFZ4mrze_-3LqYdlQyE"), None);
    assert_eq!(
        Uuid::parse("ASNFZ4mrze+/3LqYdlQyEA"),
        None,
        "standard alphabet"
    );
    for v in [1u128, u128::MAX, 0xdead_beef << 64] {
        assert_eq!(Uuid::parse(&Uuid(v).to_string()), Some(Uuid(v)));
    }
}

#[test]
fn partition_metadata_round_trip() {
    let dir = tmp();
    let f = PartitionMetadataFile::in_dir(dir.path());
    assert_eq!(f.read().unwrap(), None);
    let id = Uuid::parse("ASNFZ4mrze_-3LqYdlQyEA").unwrap();
    f.write(id).unwrap();
    assert_eq!(
        fs::read_to_string(f.path()).unwrap(),
        "version: 0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA"
    );
    assert_eq!(f.read().unwrap(), Some(id));
    assert!(f.write(Uuid::ZERO).is_err());
    // Verbatim from a Kafka 4.4.0 broker, and with a trailing newline some tools add.
    let p = Path::new("partition.metadata");
    let real =
        PartitionMetadataFile::parse(p, "version: 0\ntopic_id: JwtkD3LKRbeUc4ol_YRygA").unwrap();
    assert_eq!(
        PartitionMetadataFile::render(real),
        "version: 0\ntopic_id: JwtkD3LKRbeUc4ol_YRygA"
    );
    assert_eq!(
        PartitionMetadataFile::parse(p, "version: 0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA\n").unwrap(),
        id
    );
    for (text, line) in [
        ("version: 1\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA", "line 1"),
        ("version:0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA", "line 1"),
        ("", "line 1"),
        ("version: 0\n", "line 2"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "line 2"),
        ("version: 0\ntopic_id: nope", "line 2"),
    ] {
        let e = PartitionMetadataFile::parse(p, text)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(line) && e.contains("partition.metadata"),
            "{text:?}: {e}"
        );
    }
}

#[test]
fn clean_shutdown_marker() {
    let dir = tmp();
    let f = CleanShutdownFile::in_log_dir(dir.path());
    assert_eq!(f.read().unwrap(), None);
    f.write(42).unwrap();
    // Byte for byte what a Kafka 4.4 broker left on clean shutdown (epoch 12 there).
    assert_eq!(
        fs::read_to_string(f.path()).unwrap(),
        r#"{"version":0,"brokerEpoch":42}"#
    );
    assert_eq!(
        CleanShutdownFile::render(12),
        r#"{"version":0,"brokerEpoch":12}"#
    );
    assert_eq!(
        f.read().unwrap(),
        Some(CleanShutdown {
            broker_epoch: Some(42)
        })
    );
    // The 3.5-era string map.
    fs::write(f.path(), r#"{"broker_epoch":"9","version":"0"}"#).unwrap();
    assert_eq!(
        f.read().unwrap(),
        Some(CleanShutdown {
            broker_epoch: Some(9)
        })
    );
    // Kafka goes by the marker being there: bytes that are not UTF-8 are a clean shutdown,
    // epoch unknown, not an error failing every read of the log dir (a black-box tester).
    fs::write(f.path(), b"\xff\xfe{").unwrap();
    assert_eq!(
        f.read().unwrap(),
        Some(CleanShutdown { broker_epoch: None })
    );
    // Pre-3.5 brokers leave an empty marker: still a clean shutdown, epoch unknown.
    fs::write(f.path(), "").unwrap();
    assert_eq!(
        f.read().unwrap(),
        Some(CleanShutdown { broker_epoch: None })
    );
    fs::write(f.path(), "{ \"version\" : \"0\", \"broker_epoch\": 7 }").unwrap();
    assert_eq!(
        f.read().unwrap(),
        Some(CleanShutdown {
            broker_epoch: Some(7)
        })
    );
    fs::write(f.path(), "{garbage").unwrap();
    assert_eq!(
        f.read().unwrap(),
        Some(CleanShutdown { broker_epoch: None })
    );
    f.remove().unwrap();
    assert!(!f.exists());
    f.remove().unwrap();
}

#[test]
fn partition_dir_names() {
    assert_eq!(
        parse_topic_partition("my-topic-3"),
        Some(("my-topic".into(), 3))
    );
    assert_eq!(
        parse_topic_partition("a.b-c-12"),
        Some(("a.b-c".into(), 12))
    );
    assert_eq!(
        parse_topic_partition("topic--1"),
        Some(("topic-".into(), 1)),
        "a topic may end in -"
    );
    assert_eq!(
        parse_topic_partition("__consumer_offsets-49"),
        Some(("__consumer_offsets".into(), 49))
    );
    for bad in [
        "topic",
        "-3",
        "topic-",
        "topic-x",
        "topic-+1",
        "recovery-point-offset-checkpoint",
        "t-99999999999",
    ] {
        assert_eq!(parse_topic_partition(bad), None, "{bad}");
    }
    let d = parse_partition_dir("my-topic-3.0123456789abcdef0123456789abcdef-delete").unwrap();
    assert_eq!(
        (d.topic.as_str(), d.partition, d.kind),
        ("my-topic", 3, PartitionDirKind::Delete)
    );
    let d = parse_partition_dir("a.b-0.0123456789abcdef0123456789abcdef-future").unwrap();
    assert_eq!(
        (d.topic.as_str(), d.partition, d.kind),
        ("a.b", 0, PartitionDirKind::Future)
    );
    assert_eq!(
        parse_partition_dir("t-1.abc-stray").unwrap().kind,
        PartitionDirKind::Stray
    );
    assert_eq!(parse_topic_partition("t-1.abc-stray"), None);
    assert_eq!(parse_partition_dir("t-1-delete"), None, "no unique id");
}
