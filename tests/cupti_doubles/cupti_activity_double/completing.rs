//! Completions under way, as a consumer that shares CUPTI sees them from its own thread while another thread flushes.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use super::{builder, kernel};
use crate::common::{double, serial};
use gpu_tools::cupti::activity::{ActivityKinds, completions_elsewhere};

#[test]
fn a_completion_on_another_thread_is_under_way_until_its_closure_returns() {
    let _serial = serial();
    let (inside_tx, inside_rx) = mpsc::channel::<()>();
    let (leave_tx, leave_rx) = mpsc::channel::<()>();
    let leave_rx = Mutex::new(leave_rx);
    let tracer = builder(ActivityKinds::CONCURRENT_KERNEL)
        .start(move |batch| {
            if batch.count() > 0 {
                let _ = inside_tx.send(());
                let _ = leave_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
            }
        })
        .expect("tracer starts on the double");
    assert_eq!(kernel(1, 1_000), 1);
    assert_eq!(completions_elsewhere(), 0, "none before the flush");
    // Another thread flushes: the buffer is completed there, and its closure waits.
    let flusher = std::thread::spawn(|| double().flush_completed());
    inside_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the buffer was completed on the flushing thread");
    assert_eq!(
        completions_elsewhere(),
        1,
        "under way while its closure runs"
    );
    leave_tx.send(()).unwrap();
    assert_eq!(flusher.join().unwrap(), 0, "the flush succeeded");
    assert_eq!(completions_elsewhere(), 0, "ended with its closure");
    tracer.stop().unwrap();
}
