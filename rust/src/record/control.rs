//! Control records (Kafka's `ControlRecordType`, `EndTransactionMarker`): the commit/abort markers a
//! transaction coordinator writes, plus the KRaft control types a metadata log carries.

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    Abort,
    Commit,
    LeaderChange,
    SnapshotHeader,
    SnapshotFooter,
    KRaftVersion,
    KRaftVoters,
    Unknown(i16),
}

impl ControlRecordType {
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KRaftVersion,
            6 => ControlRecordType::KRaftVoters,
            other => ControlRecordType::Unknown(other),
        }
    }

    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KRaftVersion => 5,
            ControlRecordType::KRaftVoters => 6,
            ControlRecordType::Unknown(id) => id,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ControlRecordType::Abort => "ABORT",
            ControlRecordType::Commit => "COMMIT",
            ControlRecordType::LeaderChange => "LEADER_CHANGE",
            ControlRecordType::SnapshotHeader => "SNAPSHOT_HEADER",
            ControlRecordType::SnapshotFooter => "SNAPSHOT_FOOTER",
            ControlRecordType::KRaftVersion => "KRAFT_VERSION",
            ControlRecordType::KRaftVoters => "KRAFT_VOTERS",
            ControlRecordType::Unknown(_) => "UNKNOWN",
        }
    }

    /// Parses a control record's key: version (i16, 0) then type (i16).
    pub fn parse_key(key: Option<&[u8]>) -> Result<Self> {
        let key = key.ok_or_else(|| Error::corrupt("control record has a null key"))?;
        if key.len() < 4 {
            return Err(Error::corrupt(format!(
                "control record key has {} bytes, expected 4",
                key.len()
            )));
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(Error::corrupt(format!(
                "control record key has invalid version {version}"
            )));
        }
        Ok(Self::from_id(i16::from_be_bytes([key[2], key[3]])))
    }

    pub fn key_bytes(self) -> [u8; 4] {
        let id = self.id().to_be_bytes();
        [0, 0, id[0], id[1]]
    }
}

/// The value of a commit/abort control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTransactionMarker {
    pub control_type: ControlRecordType,
    pub coordinator_epoch: i32,
}

impl EndTransactionMarker {
    pub const CURRENT_VERSION: i16 = 0;

    pub fn parse(control_type: ControlRecordType, value: Option<&[u8]>) -> Result<Self> {
        let value =
            value.ok_or_else(|| Error::corrupt("end transaction marker has a null value"))?;
        if value.len() < 6 {
            return Err(Error::corrupt(format!(
                "end transaction marker value has {} bytes, expected 6",
                value.len()
            )));
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(Error::corrupt(format!(
                "end transaction marker has invalid version {version}"
            )));
        }
        Ok(Self {
            control_type,
            coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
        })
    }

    pub fn value_bytes(&self) -> [u8; 6] {
        let v = Self::CURRENT_VERSION.to_be_bytes();
        let e = self.coordinator_epoch.to_be_bytes();
        [v[0], v[1], e[0], e[1], e[2], e[3]]
    }
}
