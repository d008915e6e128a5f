//! The saved counter-data container (`cupti::profiler::image`), property-tested: arbitrary files round trip, and
//! arbitrary or mutated bytes never panic, never allocate past the input, and are refused unless they still hold a
//! well-formed file whose image matches its hash. `PROPTEST_CASES` raises the number of cases.
#![cfg(feature = "cupti")]

use gpu_tools::cupti::profiler::Method;
use gpu_tools::cupti::profiler::image::{CounterDataFile, ImageFileError, RecordInfo};
use proptest::prelude::*;

fn file() -> impl Strategy<Value = CounterDataFile> {
    (
        any::<bool>(),
        "[A-Z0-9]{0,8}",
        proptest::collection::vec("[a-z_.]{0,40}", 0..6),
        proptest::collection::vec(("[a-z0-9/]{0,20}", any::<u64>(), any::<u64>()), 0..6),
        proptest::collection::vec(any::<u8>(), 0..512),
    )
        .prop_map(|(range, chip, metrics, records, image)| CounterDataFile {
            method: if range {
                Method::RangeProfiler
            } else {
                Method::PmSampling
            },
            chip,
            metrics,
            records: records
                .into_iter()
                .map(|(name, start, end)| RecordInfo { name, start, end })
                .collect(),
            image,
        })
}

proptest! {
    #[test]
    fn files_round_trip(f in file()) {
        prop_assert_eq!(CounterDataFile::parse(&f.to_bytes()), Ok(f));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = CounterDataFile::parse(&bytes);
    }

    #[test]
    fn mutated_files_are_refused_or_still_consistent(
        f in file(),
        flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..4),
        cut in any::<usize>(),
    ) {
        let mut bytes = f.to_bytes();
        for (at, x) in flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        let cut = cut % (bytes.len() + 1);
        match CounterDataFile::parse(&bytes[..cut]) {
            // What parses must write back to the same bytes (the reserved byte, 11, is written as 0): nothing was
            // read past or around.
            Ok(g) => {
                let mut expect = bytes[..cut].to_vec();
                expect[11] = 0;
                prop_assert_eq!(g.to_bytes(), expect);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn a_huge_record_count_is_refused_before_allocating() {
    let f = CounterDataFile {
        method: Method::PmSampling,
        chip: "GH100".into(),
        metrics: vec![],
        records: vec![],
        image: vec![1, 2, 3],
    };
    let mut bytes = f.to_bytes();
    // The record count follows magic (8), version (2), method (2), chip (2 + 5) and the metric count (2).
    let at = 8 + 2 + 2 + 2 + 5 + 2;
    bytes[at..at + 4].copy_from_slice(&0x000F_FFFFu32.to_le_bytes());
    assert_eq!(
        CounterDataFile::parse(&bytes),
        Err(ImageFileError::Truncated("records"))
    );
}
