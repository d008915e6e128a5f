//! `ProcessCheckpoint` with a driver that predates the process-checkpoint calls (the plain driver double,
//! `gpu-tools-testing/doubles/cuda_driver.c`, lacks them as drivers before CUDA 12.8 do): the driver loads, and every entry
//! point answers `Unsupported` naming the missing call.
#![cfg(feature = "cupti")]

use gpu_tools_testing::process as common;

use gpu_tools::cuda::Driver;
use gpu_tools::cuda::process::{ProcessCheckpoint, ProcessCheckpointError as E};

#[test]
fn an_older_driver_loads_and_reports_unsupported() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let driver = Driver::load_from(gpu_tools_testing::double_path("cuda_driver"))
        .expect("driver double loads");
    assert!(driver.api().cu_checkpoint_process_lock.is_none());
    let t = common::Target::sleeper();
    for e in [
        ProcessCheckpoint::state(t.pid()).unwrap_err(),
        ProcessCheckpoint::attach(t.pid()).unwrap_err(),
        ProcessCheckpoint::adopt(t.pid()).unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                E::Unsupported {
                    call: "cuCheckpointProcessGetState"
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("CUDA 12.8"), "{e}");
    }
    // The pid is checked first all the same.
    assert!(matches!(
        ProcessCheckpoint::attach(0),
        Err(E::InvalidPid { .. })
    ));
    let uuid = driver.device_uuid(0).unwrap_err();
    assert_eq!(uuid.code, 801, "{uuid}");
}
