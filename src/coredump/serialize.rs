//! `serde::Serialize` for the dump's types whose derived form would not suit a report: memory regions (their
//! address and length, not their bytes), generation flags (by name), the dump itself (its private fields) and a
//! lane seen with its place (device, SM, block and warp by their ids, not whole).

use bitflags::Flags;
use serde::ser::{Serialize, SerializeSeq, SerializeStruct, Serializer};

use super::{CoreDump, GenerationFlags, LaneView, Region};

impl Serialize for Region {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Region", 2)?;
        s.serialize_field("address", &self.address())?;
        s.serialize_field("len", &self.len())?;
        s.end()
    }
}

impl Serialize for GenerationFlags {
    /// The names of the known flags set, then any unknown bits as one hexadecimal number.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // `all()` includes every bit (the type keeps unknown ones); the named flags are those with a name.
        let named = GenerationFlags::FLAGS
            .iter()
            .filter(|f| !f.name().is_empty())
            .fold(0, |bits, f| bits | f.value().bits());
        let unknown = self.bits() & !named;
        let names: Vec<&str> = self.iter_names().map(|(name, _)| name).collect();
        let mut seq = serializer.serialize_seq(Some(names.len() + usize::from(unknown != 0)))?;
        for name in names {
            seq.serialize_element(name)?;
        }
        if unknown != 0 {
            seq.serialize_element(&format!("{unknown:#x}"))?;
        }
        seq.end()
    }
}

impl Serialize for CoreDump {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("CoreDump", 5)?;
        s.serialize_field("abi_version", &self.abi_version())?;
        s.serialize_field("metadata", &self.metadata())?;
        s.serialize_field("devices", self.devices())?;
        s.serialize_field("global_memory", self.global_memory())?;
        s.serialize_field("managed_memory", self.managed_memory())?;
        s.end()
    }
}

impl Serialize for LaneView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("LaneView", 6)?;
        s.serialize_field("device", &self.device.index)?;
        s.serialize_field("sm", &self.sm.id)?;
        s.serialize_field("grid", &self.block.grid_id)?;
        s.serialize_field("block", &self.block.block_idx)?;
        s.serialize_field("warp", &self.warp.id)?;
        s.serialize_field("lane", self.lane)?;
        s.end()
    }
}
