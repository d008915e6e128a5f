//! The order of the ranks' groups: by host (the numbers in its name as numbers), then rank, each rank's process
//! group followed by its GPUs', all before the groups of other processes.

use super::{Timeline, TimelineSink};

/// Where the groups of ranks sort: before every process numbered by its pid, from the lowest 32-bit place up.
pub(super) const RANK_SORT: i64 = i32::MIN as i64;
/// Places of one rank's groups: its process, then its GPUs.
pub(super) const RANK_SLOTS: i64 = 64;
/// Most rank places: `RANK_SORT + RANK_PLACES * RANK_SLOTS` is 0.
const RANK_PLACES: i64 = 1 << 25;

/// Host names in the order an operator reads them: as text, but a run of digits as its number (`h2` before `h10`,
/// `node-9` before `node-10`); equal numbers with more leading zeros first, then as text.
pub(super) fn natural_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (&x[..n], &y[..m]);
                let strip = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
                let (p0, q0) = (&p[strip(p)..], &q[strip(q)..]);
                let by_value = p0.len().cmp(&q0.len()).then_with(|| p0.cmp(q0));
                if by_value != Ordering::Equal {
                    return by_value;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

impl<S: TimelineSink> Timeline<S> {
    /// Orders the groups of ranks by host, then rank: `ranks` are the (host, rank) pairs of the processes about to
    /// be read, from a first reading of the same files ([`Job::process_ranks`](crate::report::Job::process_ranks)).
    /// Hosts sort by name, the numbers in a name as numbers (`h2` before `h10`). Without it, and for a rank not
    /// given, ranks sort by host in the order the hosts are met, then by rank.
    pub fn order_ranks(&mut self, ranks: impl IntoIterator<Item = (String, u32)>) {
        let mut ranks: Vec<(String, u32)> = ranks.into_iter().collect();
        ranks.sort_by(|a, b| natural_order(&a.0, &b.0).then(a.1.cmp(&b.1)));
        ranks.dedup();
        self.rank_order = ranks
            .into_iter()
            .enumerate()
            .map(|(i, r)| (r, i64::try_from(i).unwrap_or(i64::MAX)))
            .collect();
    }

    /// The place of a rank among the ranks' groups: as [`order_ranks`](Self::order_ranks) gave it, else after those
    /// given, by the host's order met (up to 512), then rank (up to 65,535).
    fn rank_place(&mut self, host: &str, rank: u32) -> i64 {
        if let Some(&place) = self.rank_order.get(&(host.to_string(), rank)) {
            return place.min(RANK_PLACES - 1);
        }
        let h = match self.hosts_met.iter().position(|m| m == host) {
            Some(h) => h,
            None => {
                self.hosts_met.push(host.to_string());
                self.hosts_met.len() - 1
            }
        };
        let met =
            (i64::try_from(h).unwrap_or(i64::MAX).min(511) << 16) | i64::from(rank.min(65_535));
        let given = i64::try_from(self.rank_order.len()).unwrap_or(i64::MAX);
        given.saturating_add(met).min(RANK_PLACES - 1)
    }

    /// The place of stream `key`'s rank, where it has one (kept, so that its process and GPU groups agree).
    pub(super) fn stream_place(&mut self, key: (u32, u32)) -> Option<i64> {
        let s = self.streams.get(&key)?;
        if let Some(place) = s.place {
            return Some(place);
        }
        let info = s.info.as_ref()?;
        let rank = info.rank()?;
        let host = info.host.clone();
        let place = self.rank_place(&host, rank);
        self.streams.entry(key).or_default().place = Some(place);
        Some(place)
    }
}
