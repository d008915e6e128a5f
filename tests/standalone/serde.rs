//! The `serde` feature: the data types tools emit serialise to the JSON a report would want (one of each kind).
#![cfg(feature = "serde")]

use serde_json::json;

#[test]
fn a_trace_record_is_tagged_with_its_kind() {
    use gpu_tools::trace::{KernelRecord, Record};
    let record = Record::Kernel(KernelRecord {
        start: 100,
        end: 250,
        device: 0,
        context: 1,
        stream: 7,
        correlation: 42,
        grid_id: 9,
        grid: [4, 1, 1],
        block: [256, 1, 1],
        static_shared: 0,
        dynamic_shared: 1024,
        registers: 32,
        graph_id: 0,
        graph_node_id: 0,
        name: "_Z6kernelPf".into(),
    });
    let v = serde_json::to_value(&record).unwrap();
    assert_eq!(v["record"], "kernel");
    assert_eq!(v["name"], "_Z6kernelPf");
    assert_eq!(v["grid"], json!([4, 1, 1]));
    assert_eq!(v["end"], 250);
}

#[cfg(feature = "coredump")]
use gpu_tools_testing::coredump_writer as writer;

#[cfg(feature = "coredump")]
#[test]
fn a_core_dump_and_a_faulting_lane_serialise() {
    use gpu_tools::coredump::CoreDump;
    use writer::expect;

    let dump = CoreDump::from_bytes(writer::sample(writer::Layout::Current)).unwrap();
    let v = serde_json::to_value(&dump).unwrap();
    assert_eq!(v["abi_version"], 7);
    let device = &v["devices"][0];
    assert_eq!(device["name"], expect::DEVICE_NAME);
    assert_eq!(device["status"], json!({ "Ok": null }));
    // Memory regions are described, not copied into the report.
    let global = &v["global_memory"][0];
    assert!(
        global["address"].is_u64() && global["len"].is_u64(),
        "{global}"
    );
    assert_eq!(global.as_object().unwrap().len(), 2);
    // Function symbols: a list, sorted by address.
    let functions = &device["contexts"][0]["modules"][0]["functions"];
    let starts: Vec<u64> = functions
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["value"].as_u64().unwrap())
        .collect();
    assert!(
        !starts.is_empty() && starts.windows(2).all(|w| w[0] <= w[1]),
        "{functions}"
    );

    let lane = dump.faulting_lanes().next().unwrap();
    let v = serde_json::to_value(lane).unwrap();
    assert_eq!(v["device"], 0);
    assert_eq!(v["sm"], expect::FAULT_SM);
    assert_eq!(v["warp"], expect::FAULT_WARP);
    assert_eq!(v["lane"]["id"], expect::FAULT_LANE);
    assert_eq!(v["lane"]["pc"], expect::FAULT_PC);
    assert!(v["lane"]["exception"].is_string(), "{v}");
    assert_eq!(v["block"], json!({ "x": 1, "y": 0, "z": 0 }));
    if let Some(meta) = dump.metadata() {
        let flags = serde_json::to_value(meta.flags).unwrap();
        assert!(flags.is_array(), "{flags}");
    }
}

#[cfg(feature = "coredump")]
#[test]
fn generation_flags_serialise_by_name() {
    use gpu_tools::coredump::GenerationFlags;
    let flags = GenerationFlags::SKIP_GLOBAL_MEMORY
        | GenerationFlags::SKIP_SHARED_MEMORY
        | GenerationFlags::from_bits_retain(1 << 9);
    assert_eq!(
        serde_json::to_value(flags).unwrap(),
        json!(["SKIP_GLOBAL_MEMORY", "SKIP_SHARED_MEMORY", "0x200"])
    );
}

#[cfg(any(feature = "cupti", feature = "cudbg"))]
#[test]
fn process_checkpoint_states_serialise() {
    use gpu_tools::cuda::GpuUuid;
    use gpu_tools::cuda::process::{GpuPair, ProcessState};
    assert_eq!(
        serde_json::to_value(ProcessState::Checkpointed).unwrap(),
        "Checkpointed"
    );
    assert_eq!(
        serde_json::to_value(ProcessState::Unknown(9)).unwrap(),
        json!({ "Unknown": 9 })
    );
    let pair = GpuPair {
        checkpointed: GpuUuid([0x11; 16]),
        restore_on: GpuUuid([0xab; 16]),
    };
    let v: serde_json::Value = serde_json::to_value(pair).unwrap();
    assert_eq!(
        v["checkpointed"],
        "GPU-11111111-1111-1111-1111-111111111111"
    );
    assert_eq!(v["restore_on"], "GPU-abababab-abab-abab-abab-abababababab");
}
