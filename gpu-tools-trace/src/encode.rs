//! Writing records as a stream ([`wire`](super::wire) describes the layout).

use std::collections::HashMap;
use std::sync::Arc;

use super::names::FastBuild;
use super::record::*;
use super::wire::{FRAME_HEADER_LEN, MAX_FRAME, MAX_NAME, StreamHeader, tag};
use super::{CounterGap, CounterSample, KernelMetricsRecord, ProfileLoss, StallRecord};

/// Encodes records into frames, defining each name once per stream.
///
/// The encoder appends to an internal buffer; the owner sends [`bytes`](Encoder::bytes) and then
/// [`clear`](Encoder::clear)s it. The stream header is the first thing in the buffer after [`Encoder::new`]. Names
/// stay defined across `clear`, as they are for the receiving [`Decoder`](super::Decoder).
///
/// A name is looked up first by the address of its `Arc` (records from one [`NameTable`](super::NameTable) share
/// it, so a repeated name costs one integer lookup), then by its text; the encoder keeps every `Arc` it saw, so an
/// address cannot be reused for other text while it is a key.
#[derive(Debug)]
pub struct Encoder {
    buf: Vec<u8>,
    by_text: HashMap<Arc<str>, u32, FastBuild>,
    by_address: HashMap<usize, (Arc<str>, u32), FastBuild>,
    /// The last ids found by address, direct-mapped in front of `by_address`: a launch's few names hit here
    /// without a probe of the map. Holds only addresses `by_address` keeps alive; emptied with it.
    recent: [(usize, u32); RECENT],
    records: u64,
}

/// Slots of [`Encoder::recent`].
const RECENT: usize = 64;

/// Most `Arc` addresses remembered; past it the address map starts over (names stay defined by text).
const MAX_ADDRESSES: usize = 1 << 16;

impl Encoder {
    /// A stream that starts with `header`.
    pub fn new(header: &StreamHeader) -> Self {
        let mut buf = Vec::with_capacity(64 << 10);
        header.write(&mut buf);
        Encoder {
            buf,
            by_text: HashMap::default(),
            by_address: HashMap::default(),
            recent: [(0, 0); RECENT],
            records: 0,
        }
    }

    /// The bytes encoded since the last [`clear`](Encoder::clear).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Forgets the encoded bytes (after they were sent), keeping the capacity and the defined names.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Records encoded so far (names not counted).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Appends one record (and a name frame first for a name not sent before): each kind by the method named
    /// after it, below.
    pub fn push(&mut self, record: &Record) {
        self.records += 1;
        match record {
            Record::Kernel(k) => self.push_kernel(k),
            Record::Memcpy(m) => self.push_memcpy(m),
            Record::Memset(m) => self.push_memset(m),
            Record::Api(a) => self.push_api(a),
            Record::Synchronization(s) => self.push_synchronization(s),
            Record::Overhead(o) => self.push_overhead(o),
            Record::Dropped(d) => self.push_dropped(d),
            Record::ProcessStart(p) => self.push_process_start(p),
            Record::ProcessEnd(p) => self.push_process_end(p),
            Record::Notice(n) => self.push_notice(n),
            Record::CodedNotice(n) => self.push_coded_notice(n),
            Record::GraphLaunch(g) => self.push_graph_launch(g),
            Record::Graph(g) => self.push_graph(g),
            Record::Marker(m) => self.push_marker(m),
            Record::MarkerData(d) => self.push_marker_data(d),
            Record::ClockAnchor(a) => self.push_clock_anchor(a),
            Record::ProcessInfo(p) => self.push_process_info(p),
            Record::KernelMetrics(k) => self.push_kernel_metrics(k),
            Record::Stall(s) => self.push_stall(s),
            Record::ProfileLoss(l) => self.push_profile_loss(l),
            Record::CounterSample(s) => self.push_counter_sample(s),
            Record::CounterGap(g) => self.push_counter_gap(g),
        }
    }

    // The records a traced launch makes (kernels, API calls, copies and sets) are built on the stack and appended
    // at once ([`Fixed`]); the rest through `frame`.

    fn push_kernel(&mut self, k: &KernelRecord) {
        let name = self.name_id(&k.name);
        let mut f = Fixed::<{ TIMED + 8 + 4 * 5 + 4 * 6 + 4 * 3 + 2 + 8 }>::timed(
            tag::KERNEL,
            (k.start, k.end),
        );
        f.put64(k.grid_id);
        f.put32(k.device);
        f.put32(k.context);
        f.put32(k.stream);
        f.put32(k.correlation);
        f.put32(name);
        for v in k.grid.iter().chain(k.block.iter()) {
            f.put32(*v);
        }
        f.put32(k.static_shared);
        f.put32(k.dynamic_shared);
        f.put32(k.graph_id);
        f.put(&k.registers.to_le_bytes());
        f.put64(k.graph_node_id);
        f.append_to(&mut self.buf);
    }

    fn push_memcpy(&mut self, m: &MemcpyRecord) {
        let mut f = Fixed::<{ TIMED + 8 + 4 * 4 + 4 }>::timed(tag::MEMCPY, (m.start, m.end));
        f.put64(m.bytes);
        f.put32(m.device);
        f.put32(m.context);
        f.put32(m.stream);
        f.put32(m.correlation);
        f.put(&[
            m.kind.code(),
            m.src.code(),
            m.dst.code(),
            u8::from(m.is_async),
        ]);
        f.append_to(&mut self.buf);
    }

    fn push_memset(&mut self, m: &MemsetRecord) {
        let mut f = Fixed::<{ TIMED + 8 + 4 * 5 + 2 }>::timed(tag::MEMSET, (m.start, m.end));
        f.put64(m.bytes);
        f.put32(m.device);
        f.put32(m.context);
        f.put32(m.stream);
        f.put32(m.correlation);
        f.put32(m.value);
        f.put(&[m.memory.code(), u8::from(m.is_async)]);
        f.append_to(&mut self.buf);
    }

    fn push_api(&mut self, a: &ApiRecord) {
        let name = self.name_id(&a.name);
        let mut f = Fixed::<{ TIMED + 4 + 4 * 6 }>::timed(tag::API, (a.start, a.end));
        f.put(&[a.domain.code(), 0, 0, 0]);
        f.put32(a.cbid);
        f.put32(name);
        f.put32(a.correlation);
        f.put32(a.process);
        f.put32(a.thread);
        f.put32(a.return_value);
        f.append_to(&mut self.buf);
    }

    fn push_synchronization(&mut self, s: &SyncRecord) {
        self.timed(tag::SYNC, (s.start, s.end), |b| {
            put32(b, s.context);
            put32(b, s.stream);
            put32(b, s.event);
            put32(b, s.correlation);
            b.push(s.kind.code());
        });
    }

    fn push_overhead(&mut self, o: &OverheadRecord) {
        self.timed(tag::OVERHEAD, (o.start, o.end), |b| {
            put64(b, o.object_id);
            put32(b, o.kind);
            put32(b, o.object_kind);
        });
    }

    fn push_dropped(&mut self, d: &DroppedRecords) {
        self.frame(tag::DROPPED, |b| {
            put64(b, d.count);
            put32(b, d.context);
            put32(b, d.stream);
        });
    }

    fn push_process_start(&mut self, p: &ProcessStart) {
        self.frame(tag::PROCESS_START, |b| {
            put64(b, p.time);
            put32(b, p.pid);
            put32(b, p.parent_pid);
            b.extend_from_slice(cut(&p.command, 4096).as_bytes());
        });
    }

    fn push_process_end(&mut self, p: &ProcessEnd) {
        self.frame(tag::PROCESS_END, |b| {
            put64(b, p.time);
            put64(b, p.records);
            put64(b, p.dropped);
            put64(b, p.skipped);
            put64(b, p.callback_panics);
            b.push(p.reason.code());
        });
    }

    fn push_notice(&mut self, n: &Notice) {
        self.frame(tag::NOTICE, |b| {
            b.push(n.level.code());
            b.extend_from_slice(cut(&n.text, MAX_NAME).as_bytes());
        });
    }

    fn push_coded_notice(&mut self, n: &CodedNotice) {
        self.frame(tag::CODED_NOTICE, |b| {
            b.push(n.level.code());
            b.extend_from_slice(&n.code.to_le_bytes());
            let values = &n.values[..n.values.len().min(usize::from(u8::MAX))];
            b.push(values.len() as u8);
            for v in values {
                put64(b, *v);
            }
            put_text16(b, &n.detail);
            b.extend_from_slice(cut(&n.text, MAX_NAME).as_bytes());
        });
    }

    fn push_graph_launch(&mut self, g: &GraphLaunchRecord) {
        self.timed(tag::GRAPH_LAUNCH, (g.start, g.end), |b| {
            for v in [
                g.device,
                g.context,
                g.stream,
                g.correlation,
                g.graph_id,
                g.end_device,
                g.end_context,
            ] {
                put32(b, v);
            }
        });
    }

    fn push_graph(&mut self, g: &GraphInfo) {
        self.frame(tag::GRAPH, |b| {
            put64(b, g.time);
            put32(b, g.graph_id);
            put32(b, g.exec_id);
            put32(b, g.node_count);
        });
    }

    fn push_marker(&mut self, m: &MarkerRecord) {
        let domain = self.name_id(&m.domain);
        self.frame(tag::MARKER, |b| {
            put64(b, m.time);
            put32(b, m.id);
            put32(b, m.process);
            put32(b, m.thread);
            put32(b, domain);
            b.push(m.kind.code());
            b.extend_from_slice(cut(&m.name, MAX_NAME).as_bytes());
        });
    }

    fn push_marker_data(&mut self, d: &MarkerData) {
        self.frame(tag::MARKER_DATA, |b| {
            let (kind, bits) = d.payload.to_wire();
            put32(b, d.id);
            put32(b, d.color.unwrap_or(0));
            put32(b, d.category);
            put64(b, bits);
            b.push(u8::from(d.color.is_some()));
            b.push(kind);
        });
    }

    fn push_clock_anchor(&mut self, a: &ClockAnchor) {
        self.frame(tag::CLOCK_ANCHOR, |b| {
            put64(b, a.monotonic);
            put64(b, a.realtime);
            put32(b, a.uncertainty);
        });
    }

    fn push_process_info(&mut self, p: &ProcessInfo) {
        self.frame(tag::PROCESS_INFO, |b| {
            put_text16(b, &p.host);
            put_text16(b, &p.boot_id);
            // A frame above MAX_FRAME ends the reader's stream (256 labels of 4 KiB names and values would make
            // one of 2 MiB): the labels are cut to those that fit, in order.
            let mut room = MAX_FRAME as usize
                - (2 + cut(&p.host, 4096).len() + 2 + cut(&p.boot_id, 4096).len() + 2);
            let labels: Vec<&(String, String)> = p
                .labels
                .iter()
                .take(256)
                .take_while(|(k, v)| {
                    let need = 4 + cut(k, 4096).len() + cut(v, 4096).len();
                    room = match room.checked_sub(need) {
                        Some(left) => left,
                        None => return false,
                    };
                    true
                })
                .collect();
            b.extend_from_slice(&(labels.len() as u16).to_le_bytes());
            for (k, v) in labels {
                put_text16(b, k);
                put_text16(b, v);
            }
        });
    }

    fn push_kernel_metrics(&mut self, k: &KernelMetricsRecord) {
        let kernel = self.name_id(&k.kernel);
        let ids = self.value_ids(&k.metrics);
        self.frame(tag::KERNEL_METRICS, |b| {
            put32(b, k.device);
            put32(b, k.context);
            put32(b, k.correlation);
            put32(b, k.launch);
            put32(b, kernel);
            put_values(b, &ids);
        });
    }

    fn push_stall(&mut self, s: &StallRecord) {
        let function = self.name_id(&s.function);
        let ids: Vec<(u32, u32)> = s
            .stalls
            .iter()
            .take(usize::from(u16::MAX))
            .map(|(r, n)| (self.name_id(r), *n))
            .collect();
        self.frame(tag::STALL, |b| {
            put32(b, s.context);
            put32(b, function);
            put64(b, s.pc_offset);
            b.extend_from_slice(&(ids.len() as u16).to_le_bytes());
            for (id, n) in ids {
                put32(b, id);
                put32(b, n);
            }
        });
    }

    fn push_profile_loss(&mut self, l: &ProfileLoss) {
        self.frame(tag::PROFILE_LOSS, |b| {
            put64(b, l.count);
            put32(b, l.context);
            b.push(l.kind.code());
        });
    }

    fn push_counter_sample(&mut self, s: &CounterSample) {
        let ids = self.value_ids(&s.values);
        self.timed(tag::COUNTER_SAMPLE, (s.start, s.end), |b| {
            put32(b, s.device);
            put_values(b, &ids);
        });
    }

    fn push_counter_gap(&mut self, g: &CounterGap) {
        self.timed(tag::COUNTER_GAP, (g.start, g.end), |b| {
            put32(b, g.device);
            put64(b, g.samples);
        });
    }

    /// The name ids of (metric name, value) pairs, sending their name frames first. A frame holds at most
    /// `u16::MAX` pairs; more are not sent.
    fn value_ids(&mut self, values: &[(Arc<str>, f64)]) -> Vec<(u32, f64)> {
        values
            .iter()
            .take(usize::from(u16::MAX))
            .map(|(m, v)| (self.name_id(m), *v))
            .collect()
    }

    /// The id of `name`, sending a name frame the first time. The empty name is id 0 and never sent.
    fn name_id(&mut self, name: &Arc<str>) -> u32 {
        if name.is_empty() {
            return 0;
        }
        let address = Arc::as_ptr(name).cast::<u8>() as usize;
        // Fibonacci hashing of the address into the direct-mapped slots.
        let slot = ((address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % RECENT;
        if self.recent[slot].0 == address {
            return self.recent[slot].1;
        }
        if let Some(&(_, id)) = self.by_address.get(&address) {
            self.recent[slot] = (address, id);
            return id;
        }
        let id = match self.by_text.get(&**name) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.by_text.len() + 1).unwrap_or(u32::MAX);
                self.by_text.insert(Arc::clone(name), id);
                self.frame(tag::NAME, |b| {
                    put32(b, id);
                    b.extend_from_slice(cut(name, MAX_NAME).as_bytes());
                });
                id
            }
        };
        if self.by_address.len() >= MAX_ADDRESSES {
            self.by_address.clear();
            self.recent = [(0, 0); RECENT];
        }
        self.by_address.insert(address, (Arc::clone(name), id));
        self.recent[slot] = (address, id);
        id
    }

    /// Appends a frame whose payload `fill` writes, then patches its length in.
    /// A frame of a timed record: the header every timed record shares (start, end), then what `fill` writes.
    fn timed(&mut self, tag: u8, (start, end): (u64, u64), fill: impl FnOnce(&mut Vec<u8>)) {
        debug_assert!(tag::is_timed(tag), "tag {tag} is not a timed record's");
        self.frame(tag, |b| {
            put64(b, start);
            put64(b, end);
            fill(b);
        });
    }

    fn frame(&mut self, tag: u8, fill: impl FnOnce(&mut Vec<u8>)) {
        let at = self.buf.len();
        self.buf.push(tag);
        self.buf.extend_from_slice(&[0; 4]);
        fill(&mut self.buf);
        let len = (self.buf.len() - at - FRAME_HEADER_LEN) as u32;
        self.buf[at + 1..at + FRAME_HEADER_LEN].copy_from_slice(&len.to_le_bytes());
    }
}

/// The bytes of a timed frame before its own fields: the frame header, start and end.
const TIMED: usize = FRAME_HEADER_LEN + 16;

/// A frame of at most `N` bytes built on the stack and appended to the stream at once: one capacity check a
/// record, where a push per field checks at each (the encoder's largest cost on a launch's records).
struct Fixed<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Fixed<N> {
    /// A timed frame of `tag`, its header and times written.
    #[inline(always)]
    fn timed(tag: u8, (start, end): (u64, u64)) -> Self {
        debug_assert!(tag::is_timed(tag), "tag {tag} is not a timed record's");
        let mut f = Fixed {
            bytes: [0; N],
            len: FRAME_HEADER_LEN,
        };
        f.bytes[0] = tag;
        f.put64(start);
        f.put64(end);
        f
    }

    /// Appends `bytes`. The sizes are constants of each kind's fields, so the frame always has room; the
    /// round-trip tests encode every kind.
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(to) = self.bytes.get_mut(self.len..end) {
            to.copy_from_slice(bytes);
            self.len = end;
        } else {
            debug_assert!(false, "a fixed frame of {N} bytes is too small");
        }
    }

    #[inline(always)]
    fn put32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    #[inline(always)]
    fn put64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// The frame, its length patched in, at the end of `out`.
    #[inline(always)]
    fn append_to(mut self, out: &mut Vec<u8>) {
        let len = (self.len - FRAME_HEADER_LEN) as u32;
        self.bytes[1..FRAME_HEADER_LEN].copy_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.bytes[..self.len]);
    }
}

/// (metric name id, value) pairs: count u16, then each id u32 and value f64 (as `value_ids` cut them).
fn put_values(b: &mut Vec<u8>, ids: &[(u32, f64)]) {
    b.extend_from_slice(&(ids.len() as u16).to_le_bytes());
    for &(id, v) in ids {
        put32(b, id);
        put64(b, v.to_bits());
    }
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// A string cut to 4 KiB, preceded by its length as u16.
fn put_text16(b: &mut Vec<u8>, s: &str) {
    let s = cut(s, 4096);
    b.extend_from_slice(&(s.len() as u16).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimestampClock;

    fn call(name: Arc<str>) -> Record {
        Record::Api(ApiRecord {
            start: 1,
            end: 2,
            domain: ApiDomain::Runtime,
            cbid: 211,
            name,
            correlation: 3,
            process: 4,
            thread: 5,
            return_value: 0,
        })
    }

    #[test]
    fn the_recent_ids_name_only_addresses_the_map_keeps_alive() {
        let mut e = Encoder::new(&StreamHeader::new(1, 130_001, TimestampClock::Monotonic));
        // Past the address map's limit, where it starts over: an address the map let go of may be reused for
        // another name, so no recent slot may still hold it.
        for i in 0..MAX_ADDRESSES + 100 {
            e.push(&call(Arc::from(format!("f{i}"))));
            e.clear();
            let stale = e
                .recent
                .iter()
                .filter(|&&(a, _)| a != 0 && !e.by_address.contains_key(&a))
                .count();
            assert_eq!(stale, 0, "after name {i}");
        }
        assert!(e.by_address.len() < MAX_ADDRESSES, "the map started over");
    }
}
