//! The sampler thread of `trace --counters`: every [`READ_PERIOD`](super::READ_PERIOD) it reads each device's
//! sampler, puts the samples on the trace's timeline (`gpu_tools::counters::timeline`) and sends the counter
//! stream's new bytes, with the records they hold, to the receiving end ([`Msg::Counters`]), which writes them into
//! the trace file in the order they come: one writer, so the file's streams never interleave mid-frame. Told the
//! trace's end, it stops the samplers, drains what they still hold, ends each device's timeline there, sends the
//! last bytes and [`Msg::CountersClosed`], and returns a summary per device.
//!
//! A device whose sampler fails while the trace runs is reported (a notice in the stream, the summary's error);
//! the others go on, and the span it no longer covers is a gap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Duration;

use gpu_tools::counters::host_monotonic_ns;
use gpu_tools::counters::timeline::{CounterTimeline, counter_stream};
use gpu_tools::trace::{ClockAnchor, Notice, NoticeLevel, Record};

use super::super::message::Msg;
use super::super::model::CounterSummary;
use super::{OpenDevice, Opened, READ_PERIOD, describe_interval};
use crate::failure::Failure;

/// The sampler thread, reading.
pub struct Sampling {
    /// The trace's end on `CLOCK_MONOTONIC`; 0 while it runs.
    end: Arc<AtomicU64>,
    thread: Option<JoinHandle<Vec<CounterSummary>>>,
}

impl Sampling {
    /// Starts reading `opened`'s samplers: the trace's span starts now (call it just before the program is
    /// launched or the first process attached). Bytes and records go to `tx`.
    pub fn start(opened: Opened, tx: Sender<Msg>) -> Result<Sampling, Failure> {
        let start = host_monotonic_ns();
        let end = Arc::new(AtomicU64::new(0));
        let e = Arc::clone(&end);
        let thread = std::thread::Builder::new()
            .name("gpu-tools-counters".into())
            .spawn(move || run(opened, start, &e, &tx))
            .map_err(|e| Failure::new(1, format!("--counters: cannot start a thread: {e}")))?;
        Ok(Sampling {
            end,
            thread: Some(thread),
        })
    }

    /// The trace ended now: stops the samplers, writes what they still hold, closes the stream; a summary per
    /// device.
    pub fn finish(mut self) -> Vec<CounterSummary> {
        self.stop().unwrap_or_default()
    }

    fn stop(&mut self) -> Option<Vec<CounterSummary>> {
        let thread = self.thread.take()?;
        self.end.store(host_monotonic_ns().max(1), Ordering::SeqCst);
        thread.thread().unpark();
        match thread.join() {
            Ok(summaries) => Some(summaries),
            Err(_) => {
                log::warn!("the counter sampler thread panicked");
                None
            }
        }
    }
}

impl Drop for Sampling {
    fn drop(&mut self) {
        // A trace that ends early (the program could not start) stops the samplers too.
        let _ = self.stop();
    }
}

/// One device as the thread reads it.
struct Reading {
    device: OpenDevice,
    timeline: CounterTimeline,
    error: Option<String>,
}

impl Reading {
    /// The sampler failed: the first failure is kept and told in the stream.
    fn fail(&mut self, e: &gpu_tools::Error, records: &mut Vec<Record>) {
        if self.error.is_some() {
            return;
        }
        let text = format!(
            "counters of device {} ({}) stopped: {e}",
            self.device.trace_device, self.device.name
        );
        log::warn!("{text}");
        records.push(Record::Notice(Notice {
            level: NoticeLevel::Error,
            text: text.clone(),
        }));
        self.error = Some(text);
    }

    fn every(&self) -> String {
        match self.device.period {
            Some(p) => describe_interval(p),
            None => String::from("a number of clocks"),
        }
    }
}

fn run(opened: Opened, start: u64, end: &AtomicU64, tx: &Sender<Msg>) -> Vec<CounterSummary> {
    let (mut encoder, mut records) = counter_stream(opened.vendor_version);
    let mut devices: Vec<Reading> = Vec::new();
    for device in opened.devices {
        let period_ns = device.period.and_then(|p| u64::try_from(p.as_nanos()).ok());
        let timeline = CounterTimeline::new(
            device.trace_device,
            device.sampler.counters(),
            device.sampler.clock(),
            period_ns,
            start,
        );
        let timeline = match timeline {
            Ok(t) => t,
            // Not for NVIDIA's samplers, whose clock is placed; a sampler of another clock is left unread.
            Err(e) => {
                log::warn!("device {}: {e}", device.trace_device);
                continue;
            }
        };
        let reading = Reading {
            device,
            timeline,
            error: None,
        };
        records.push(Record::Notice(Notice {
            level: NoticeLevel::Info,
            text: format!(
                "counters: device {} is {} ({}, this host's CUDA device {}), sampled every {}",
                reading.device.trace_device,
                reading.device.uuid.as_deref().unwrap_or("UUID unknown"),
                reading.device.name,
                reading.device.ordinal,
                reading.every()
            ),
        }));
        devices.push(reading);
    }
    let mut samples = Vec::new();
    loop {
        let stop_at = end.load(Ordering::SeqCst);
        let mut batch = Vec::new();
        if stop_at != 0 {
            for d in devices.iter_mut() {
                d.timeline.set_end(stop_at);
                if d.error.is_none() {
                    if let Err(e) = d.device.sampler.finish() {
                        d.fail(&e, &mut batch);
                    }
                }
            }
        }
        let anchor = ClockAnchor::now();
        for d in devices.iter_mut().filter(|d| d.error.is_none()) {
            samples.clear();
            match d.device.sampler.read(Duration::ZERO, &mut samples) {
                Ok(status) => d
                    .timeline
                    .add(&samples, status.dropped, &anchor, &mut batch),
                Err(e) => d.fail(&e, &mut batch),
            }
        }
        if stop_at != 0 {
            for d in devices.iter_mut() {
                d.timeline.finish(stop_at, &mut batch);
            }
        }
        // Each device's records are in time order; across devices, this batch's are merged by time.
        batch.sort_by_key(|r| r.span().map_or(0, |(s, _)| s));
        records.append(&mut batch);
        if !records.is_empty() {
            for r in &records {
                encoder.push(r);
            }
            let bytes = encoder.bytes().to_vec();
            encoder.clear();
            if tx
                .send(Msg::Counters(bytes, std::mem::take(&mut records)))
                .is_err()
            {
                // The receiving end is gone: nothing more can be written.
                break;
            }
        }
        if stop_at != 0 {
            break;
        }
        std::thread::park_timeout(READ_PERIOD);
    }
    let _ = tx.send(Msg::CountersClosed);
    devices
        .iter()
        .map(|d| {
            let t = d.timeline.totals();
            CounterSummary {
                device: d.device.trace_device,
                name: d.device.name.clone(),
                every: d.every(),
                samples: t.samples,
                lost: t.lost,
                gaps: t.gaps,
                gap_ns: t.gap_ns,
                error: d.error.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::counters::{
        CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
    };
    use gpu_tools::trace::Decoder;

    /// A sampler on the monotonic clock that delivers a sample per millisecond of the time it is read over, and
    /// at `finish` one more that ends after the trace's end.
    struct Ticking {
        device: CounterDevice,
        counters: Vec<CounterInfo>,
        next: u64,
        finished: bool,
        fail_at_finish: bool,
    }

    impl DeviceCounters for Ticking {
        fn device(&self) -> &CounterDevice {
            &self.device
        }
        fn counters(&self) -> &[CounterInfo] {
            &self.counters
        }
        fn clock(&self) -> SampleClock {
            SampleClock::HostMonotonic
        }
        fn read(
            &mut self,
            _: Duration,
            out: &mut Vec<DeviceSample>,
        ) -> gpu_tools::Result<ReadStatus> {
            let now = host_monotonic_ns() + if self.finished { 5_000_000 } else { 0 };
            let mut n = 0;
            while self.next + 1_000_000 <= now {
                out.push(DeviceSample {
                    start_ns: self.next,
                    end_ns: self.next + 1_000_000,
                    values: vec![f64::from(self.device.index) + 40.0],
                });
                self.next += 1_000_000;
                n += 1;
            }
            Ok(ReadStatus {
                samples: n,
                dropped: 0,
                gaps: 0,
            })
        }
        fn finish(&mut self) -> gpu_tools::Result<()> {
            self.finished = true;
            if self.fail_at_finish {
                return Err(gpu_tools::cupti::ProfilingError::State("it broke").into());
            }
            Ok(())
        }
    }

    fn open(index: u32, trace_device: u32, fail_at_finish: bool) -> OpenDevice {
        OpenDevice {
            sampler: Box::new(Ticking {
                device: CounterDevice {
                    index,
                    name: format!("GPU {index}"),
                },
                counters: vec![CounterInfo {
                    name: "sm__cycles_active.avg.pct_of_peak_sustained_elapsed".into(),
                    unit: "%".into(),
                }],
                // The first sample starts a second early, as NVIDIA's do.
                next: host_monotonic_ns() - 1_000_000_000,
                finished: false,
                fail_at_finish,
            }),
            trace_device,
            ordinal: index as usize,
            name: format!("GPU {index}"),
            uuid: None,
            period: Some(Duration::from_millis(1)),
        }
    }

    #[test]
    fn the_thread_streams_every_device_clipped_to_the_trace_and_closes() {
        let (tx, rx) = std::sync::mpsc::channel();
        let opened = Opened {
            devices: vec![open(0, 1, false), open(1, 0, true)],
            vendor_version: 7,
        };
        let sampling = Sampling::start(opened, tx).unwrap();
        let started = host_monotonic_ns();
        std::thread::sleep(Duration::from_millis(120));
        let summaries = sampling.finish();
        let ended = host_monotonic_ns();
        let mut decoder = Decoder::new();
        let mut records = Vec::new();
        let mut closed = false;
        for msg in rx.try_iter() {
            match msg {
                Msg::Counters(bytes, sent) => {
                    decoder.feed(&bytes);
                    while let Some(r) = decoder.next_record().unwrap() {
                        records.push(r);
                    }
                    assert_eq!(records[records.len() - sent.len()..], sent[..]);
                }
                Msg::CountersClosed => closed = true,
                _ => panic!("only counter messages"),
            }
        }
        assert!(closed);
        let header = decoder.header().unwrap();
        assert_eq!((header.pid, header.vendor_version), (0, 7));
        assert!(matches!(records[0], Record::ClockAnchor(_)));
        assert!(matches!(records[1], Record::ProcessInfo(_)));
        let samples: Vec<_> = records
            .iter()
            .filter_map(|r| match r {
                Record::CounterSample(s) => Some(s),
                _ => None,
            })
            .collect();
        for device in [0, 1] {
            let of: Vec<_> = samples.iter().filter(|s| s.device == device).collect();
            assert!(of.len() >= 100, "device {device}: {}", of.len());
            // Within the trace's span, tiled, and the values of the sampler renumbered as the trace numbers it.
            assert!(of[0].start >= started - 50_000_000 && of[0].start <= started);
            assert!(of.windows(2).all(|w| w[0].end == w[1].start));
            assert!(of.last().unwrap().end <= ended);
            let value = of[0].values[0].1;
            assert_eq!(value, if device == 1 { 40.0 } else { 41.0 });
        }
        assert_eq!(summaries.len(), 2);
        assert_eq!(summaries[0].device, 1);
        assert!(summaries[0].error.is_none() && summaries[0].samples >= 100);
        let failed = summaries[1].error.as_deref().unwrap();
        assert!(failed.contains("it broke"), "{failed}");
        assert!(records.iter().any(
            |r| matches!(r, Record::Notice(n) if n.level == NoticeLevel::Error && n.text.contains("it broke"))
        ));
    }
}
