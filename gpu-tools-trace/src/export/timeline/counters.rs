//! Counter tracks: the samples of a counter stream ([`crate::counters`]) as one group per device, a counter track
//! per metric under it, on the same timeline as the kernels (shifted like the streams of the same host).
//!
//! A counter track holds each value from the start of its sample until the next value. Timeline formats have no
//! "no value" for a counter, so where nothing is known the track reads **0** and a slice says why: at the start of
//! each [gap](crate::CounterGap) (on the group's `counter gaps` track: "N samples lost" or "no samples"), where a
//! sample's successor starts later than one sample length after its end, for a metric a sample lacks or holds as
//! a non-finite number, and after the device's last sample. A 0 under a gap slice therefore means "not known", not
//! "idle".

use std::io;
use std::sync::Arc;

use super::numbers;
use super::{Arg, CounterTrack, CounterValue, Slice, Timeline, TimelineSink, Track, TrackProcess};
use crate::counters::label;
use crate::{CounterGap, CounterSample};

/// The tracks of one device of a counter stream, and where its values stand.
#[derive(Debug)]
pub(super) struct DeviceTracks {
    group: u64,
    /// The counter track of each metric, in the order first seen.
    metrics: Vec<(Arc<str>, u64)>,
    /// The slice track of the gaps, made on the first gap.
    gaps: Option<u64>,
    /// End and length of the latest sample.
    last_end: u64,
    last_len: u64,
    /// A value other than the closing 0 is showing.
    open: bool,
}

impl<S: TimelineSink> Timeline<S> {
    /// The tracks of `device` of counter stream `key`, its group made on first use.
    fn device_tracks(&mut self, key: (u32, u32), device: u32) -> io::Result<&mut DeviceTracks> {
        if !self.counters.contains_key(&(key.0, key.1, device)) {
            let id = self.new_track();
            let host = self
                .streams
                .get(&key)
                .and_then(|s| s.info.as_ref())
                .map(|i| i.host.clone())
                .unwrap_or_default();
            let name = if host.is_empty() {
                format!("GPU {device} counters")
            } else {
                format!("GPU {device} counters [{host}]")
            };
            // Beside the GPU groups, in a pid slot of their own; a process number of the export's own.
            let sort = numbers::place(key.0, 0xff00 | (key.1 & 0xff), Some(device));
            let pid = self.numbers.number(None)?;
            let name = self.numbers.name(name, key);
            self.sink.track(&Track {
                id,
                parent: None,
                name: name.clone(),
                process: Some(TrackProcess { pid, name }),
                sort,
            })?;
            self.counters.insert(
                (key.0, key.1, device),
                DeviceTracks {
                    group: id,
                    metrics: Vec::new(),
                    gaps: None,
                    last_end: 0,
                    last_len: 0,
                    open: false,
                },
            );
        }
        self.counters
            .get_mut(&(key.0, key.1, device))
            .ok_or_else(|| io::Error::other("counter tracks of a device went missing"))
    }

    /// Writes `value` (0 where not finite) on every counter track of a device at `time`.
    fn set_all(
        sink: &mut S,
        tracks: &DeviceTracks,
        time: u64,
        value: impl Fn(&str) -> Option<f64>,
    ) -> io::Result<()> {
        for (metric, track) in &tracks.metrics {
            let v = value(metric).filter(|v| v.is_finite()).unwrap_or(0.0);
            sink.counter(&CounterValue {
                track: *track,
                time,
                value: v,
            })?;
        }
        Ok(())
    }

    /// A counter sample of stream `key`: a value on each metric's track at the sample's start.
    pub(super) fn counter_sample(&mut self, key: (u32, u32), c: &CounterSample) -> io::Result<()> {
        let (start, end) = (
            self.alignment.apply(key.0, key.1, c.start),
            self.alignment.apply(key.0, key.1, c.end),
        );
        for (metric, _) in &c.values {
            let tracks = self.device_tracks(key, c.device)?;
            if tracks.metrics.iter().any(|(m, _)| m == metric) {
                continue;
            }
            let (group, sort) = (tracks.group, tracks.metrics.len() as i64);
            let id = self.new_track();
            let (name, unit) = label(metric);
            let name = if unit.is_empty() {
                name
            } else {
                format!("{name} ({unit})")
            };
            self.sink.counter_track(&CounterTrack {
                id,
                parent: group,
                name,
                unit,
                metric: metric.to_string(),
                sort,
            })?;
            self.device_tracks(key, c.device)?
                .metrics
                .push((Arc::clone(metric), id));
        }
        let tracks = self.counters.get_mut(&(key.0, key.1, c.device));
        let Some(tracks) = tracks else {
            return Ok(());
        };
        // A hole longer than a sample: nothing is known in it.
        if tracks.open && start > tracks.last_end.saturating_add(tracks.last_len) {
            Self::set_all(&mut self.sink, tracks, tracks.last_end, |_| None)?;
        }
        Self::set_all(&mut self.sink, tracks, start, |m| c.value(m))?;
        tracks.last_end = tracks.last_end.max(end);
        tracks.last_len = end.saturating_sub(start);
        tracks.open = true;
        Ok(())
    }

    /// A counter gap of stream `key`: its tracks read 0 from its start, and a slice on the gaps track spans it.
    pub(super) fn counter_gap(&mut self, key: (u32, u32), g: &CounterGap) -> io::Result<()> {
        let (start, end) = (
            self.alignment.apply(key.0, key.1, g.start),
            self.alignment.apply(key.0, key.1, g.end),
        );
        let gaps = match self.device_tracks(key, g.device)?.gaps {
            Some(t) => t,
            None => {
                let id = self.new_track();
                let group = self.device_tracks(key, g.device)?.group;
                self.sink.track(&Track {
                    id,
                    parent: Some(group),
                    name: "counter gaps".into(),
                    process: None,
                    sort: -1,
                })?;
                self.device_tracks(key, g.device)?.gaps = Some(id);
                id
            }
        };
        if let Some(tracks) = self.counters.get_mut(&(key.0, key.1, g.device)) {
            Self::set_all(&mut self.sink, tracks, start, |_| None)?;
            tracks.open = false;
            tracks.last_end = tracks.last_end.max(end);
        }
        let name = if g.samples > 0 {
            format!(
                "{} sample{} lost",
                g.samples,
                if g.samples == 1 { "" } else { "s" }
            )
        } else {
            "no samples".to_string()
        };
        self.sink.slice(&Slice {
            track: gaps,
            name: &name,
            category: "counter_gap",
            start,
            end,
            instant: false,
            args: vec![("samples lost", Arg::U(g.samples))],
            flow_out: None,
            flow_in: None,
            color: None,
        })
    }

    /// Ends every counter track that still shows a value: 0 after its device's last sample.
    pub(super) fn end_counters(&mut self) -> io::Result<()> {
        let mut keys: Vec<(u32, u32, u32)> = self.counters.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            if let Some(tracks) = self.counters.get_mut(&key) {
                if tracks.open {
                    Self::set_all(&mut self.sink, tracks, tracks.last_end, |_| None)?;
                    tracks.open = false;
                }
            }
        }
        Ok(())
    }
}
