//! NVTX markers: ranges (start to end) and instants on their thread's NVTX track, with their domain, category,
//! payload and colour.

use std::io;

use super::state::{Key, MAX_OPEN, Row};
use super::{Arg, Slice, Timeline, TimelineSink};
use crate::record::{MarkerData, MarkerKind, MarkerPayload, MarkerRecord};

impl<S: TimelineSink> Timeline<S> {
    pub(super) fn marker(&mut self, key: (u32, u32), m: &MarkerRecord) -> io::Result<()> {
        let time = self.alignment.apply(key.0, key.1, m.time);
        let s = self.streams.entry(key).or_default();
        match m.kind {
            MarkerKind::Start => {
                if s.open.len() < MAX_OPEN {
                    s.open
                        .insert(m.id, (m.thread, time, m.domain.to_string(), m.name.clone()));
                }
                Ok(())
            }
            MarkerKind::End => {
                let Some((thread, start, domain, name)) = s.open.remove(&m.id) else {
                    return Ok(());
                };
                let data = s.data.remove(&m.id);
                let track = self.lane(key, Key::Thread(thread, Row::Nvtx), start, time)?;
                self.nvtx_slice(track, &domain, &name, start, time, false, data)
            }
            MarkerKind::Instant => {
                let data = s.data.remove(&m.id);
                let track = self.lane(key, Key::Thread(m.thread, Row::Nvtx), time, time)?;
                let domain = m.domain.to_string();
                self.nvtx_slice(track, &domain, &m.name, time, time, true, data)
            }
            _ => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn nvtx_slice(
        &mut self,
        track: u64,
        domain: &str,
        name: &str,
        start: u64,
        end: u64,
        instant: bool,
        data: Option<MarkerData>,
    ) -> io::Result<()> {
        let mut args = Vec::new();
        if !domain.is_empty() {
            args.push(("domain", Arg::S(domain.to_string())));
        }
        let mut color = None;
        if let Some(d) = data {
            color = d.color;
            if d.category != 0 {
                args.push(("category", Arg::U(u64::from(d.category))));
            }
            match d.payload {
                MarkerPayload::Unsigned(v) => args.push(("payload", Arg::U(v))),
                MarkerPayload::Signed(v) => args.push(("payload", Arg::I(v))),
                MarkerPayload::Float(v) => args.push(("payload", Arg::F(v))),
                MarkerPayload::Other(k, v) => {
                    args.push(("payload", Arg::S(format!("kind {k}: {v:#x}"))))
                }
                _ => {}
            }
            if let Some(c) = d.color {
                args.push(("color", Arg::S(format!("#{:06x}", c & 0xff_ffff))));
            }
        }
        self.sink.slice(&Slice {
            track,
            name,
            category: "nvtx",
            start,
            end,
            instant,
            args,
            flow_out: None,
            flow_in: None,
            color,
        })
    }
}
