//! Matching the collectives of the ranks, and moving hosts so that the ends of each collective agree.

use std::collections::HashMap;

use super::{Names, RankView};
use crate::report::align::signed_duration;

/// How one host (clock domain) was put on the reference host's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HostAlignment {
    /// Host name.
    pub host: String,
    /// Boot id (empty where not recorded).
    pub boot_id: String,
    /// What its clock anchors added to its timestamps, ns.
    pub anchor_shift: i64,
    /// What its collectives added on top of that, ns (0 for the reference host, and for a host whose collectives
    /// could not be matched).
    pub correction: i64,
    /// Collectives it shares with other hosts that the correction rests on (0: anchors alone).
    pub collectives: u64,
    /// After the move, how far its ranks' collective ends lie from the median end of the same collective over all
    /// ranks: 90th percentile, ns.
    pub residual: u64,
}

/// The alignment of a job's hosts on its collectives: per host, the move and what remains; notes in words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CollectiveAlignment {
    /// Every host (clock domain) with a rank, the reference first.
    pub hosts: Vec<HostAlignment>,
    /// What was done and what could not be, in words.
    pub notes: Vec<String>,
}

/// One collective of one rank, placed in its sequence: `seq` (a name and its stream's number among the rank's
/// streams that ran the name) and `index` (its place in the reference rank's sequence).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub seq: u32,
    pub index: i64,
    /// Index into the ranks.
    pub rank: u32,
    /// Index into the rank's collectives.
    pub local: u32,
    /// Start and end, on the anchors' common clock.
    pub start: i64,
    pub end: i64,
}

/// A timestamp of a stream on the common clock, as a signed number (saturating).
pub(super) fn on_clock(t: u64, shift: i64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX).saturating_add(shift)
}

/// The median of `v` (sorted in place); the mean of the two middle values for an even count. `None` when empty.
pub(super) fn median_i64(v: &mut [i64]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        ((i128::from(v[n / 2 - 1]) + i128::from(v[n / 2])) / 2) as i64
    })
}

/// The 90th percentile (nearest rank) of `v`, sorted in place; 0 when empty.
pub(super) fn p90(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = (v.len() * 9).div_ceil(10).saturating_sub(1);
    v[i]
}

/// A host as the notes name it: `h7`, or `h7 (boot 1a2b3c4d)` where one host name has two boots.
fn host_label(hosts: &[(String, String)], d: usize) -> String {
    let (host, boot) = &hosts[d];
    let twice = hosts.iter().filter(|(h, _)| h == host).count() > 1;
    match boot.get(..8) {
        Some(short) if twice => format!("{host} (boot {short})"),
        _ => host.clone(),
    }
}

/// Rank numbers as a short list: `3, 5-7 and 2 more`.
pub(super) fn rank_list(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    if parts.len() > 8 {
        let more = parts.len() - 8;
        parts.truncate(8);
        format!("{} and {more} more", parts.join(", "))
    } else {
        parts.join(", ")
    }
}

/// A rank's collectives of one sequence, in start order (indexes into its collectives), with the sequence's id.
type RankSequences = Vec<(u32, Vec<u32>)>;

/// Matches the collectives of `ranks` (whose `domain` indexes `hosts`, 0 the reference) and aligns the hosts.
/// Returns the alignment (with a correction per host) and every placed collective, sorted by sequence and index.
pub(super) fn align(
    ranks: &[RankView<'_>],
    hosts: &[(String, String)],
    anchor_shifts: &[i64],
    names: &Names,
) -> (CollectiveAlignment, Vec<Entry>) {
    let mut notes = Vec::new();
    let (seq_keys, per_rank) = sequences(ranks);
    let seq_name = |seq: u32| sequence_name(&seq_keys, names, seq);
    let reference = reference_ranks(ranks, &per_rank);
    // Counts that disagree, per sequence: said, never silently matched.
    let seq_order = count_notes(ranks, &per_rank, &seq_name, &mut notes);
    // Place each sequence of each rank in its reference rank's: the lag that most of its ends' nearest neighbours
    // agree on.
    let (mut entries, unplaced) = place_sequences(ranks, anchor_shifts, &per_rank, &reference);
    for seq in &seq_order {
        let rs: Vec<u32> = unplaced
            .iter()
            .filter(|u| u.1 == *seq)
            .map(|u| u.0)
            .collect();
        if !rs.is_empty() {
            notes.push(format!(
                "the {} of {} {} could not be matched with the other ranks' (their ends meet no consistent \
                 partner: the windows barely overlap, or the clocks disagree by more than half the interval \
                 between two of them): left out",
                seq_name(*seq),
                if rs.len() == 1 { "rank" } else { "ranks" },
                rank_list(&rs)
            ));
        }
    }
    entries.sort_unstable_by_key(|e| (e.seq, e.index, e.rank));
    // Move the hosts until the ends of each collective agree.
    let aligned_hosts = move_hosts(ranks, hosts, anchor_shifts, &entries);
    // In words.
    alignment_notes(
        ranks,
        hosts,
        &entries,
        &reference,
        &aligned_hosts,
        &mut notes,
    );
    (
        CollectiveAlignment {
            hosts: aligned_hosts,
            notes,
        },
        entries,
    )
}

/// The sequences of the ranks' collectives: (name, stream ordinal) by id, and per rank, its collectives of each
/// sequence in start order.
fn sequences(ranks: &[RankView<'_>]) -> (Vec<(u32, u32)>, Vec<RankSequences>) {
    let mut seq_ids: HashMap<(u32, u32), u32> = HashMap::new();
    let mut seq_keys: Vec<(u32, u32)> = Vec::new();
    let mut per_rank: Vec<Vec<(u32, Vec<u32>)>> = Vec::with_capacity(ranks.len());
    for r in ranks {
        let mut by_stream: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for (i, c) in r.stream.collectives.iter().enumerate() {
            by_stream
                .entry((c.name, c.stream))
                .or_default()
                .push(u32::try_from(i).unwrap_or(u32::MAX));
        }
        let mut lists: Vec<((u32, u32), Vec<u32>)> = by_stream.into_iter().collect();
        for (_, l) in &mut lists {
            l.sort_by_key(|&i| r.stream.collectives[i as usize].start);
        }
        // Streams that ran one name, numbered by their first collective.
        lists.sort_by_key(|((name, _), l)| (*name, r.stream.collectives[l[0] as usize].start));
        let mut seqs = Vec::new();
        let mut ordinal = 0u32;
        let mut last_name = None;
        for ((name, _), l) in lists {
            if last_name != Some(name) {
                ordinal = 0;
                last_name = Some(name);
            }
            let key = (name, ordinal);
            ordinal += 1;
            let id = *seq_ids.entry(key).or_insert_with(|| {
                seq_keys.push(key);
                u32::try_from(seq_keys.len() - 1).unwrap_or(u32::MAX)
            });
            seqs.push((id, l));
        }
        per_rank.push(seqs);
    }
    (seq_keys, per_rank)
}

/// A sequence as the notes name it: the collective's name, with its stream's number where the name ran on
/// several streams.
fn sequence_name(seq_keys: &[(u32, u32)], names: &Names, seq: u32) -> String {
    let (name, ordinal) = seq_keys[seq as usize];
    if seq_keys.iter().any(|k| k.0 == name && k.1 > 0) {
        format!("{} (stream {})", names.get(name), ordinal + 1)
    } else {
        names.get(name).to_string()
    }
}

/// The ends of rank `r`'s collectives `list`, on the anchors' common clock.
fn ends(ranks: &[RankView<'_>], anchor_shifts: &[i64], r: usize, list: &[u32]) -> Vec<i64> {
    let shift = anchor_shifts[r];
    list.iter()
        .map(|&i| on_clock(ranks[r].stream.collectives[i as usize].end, shift))
        .collect()
}

/// The reference rank of each sequence: the one of the reference host with the most, else the one with the most.
fn reference_ranks(ranks: &[RankView<'_>], per_rank: &[RankSequences]) -> HashMap<u32, usize> {
    let mut reference: HashMap<u32, usize> = HashMap::new();
    for (r, seqs) in per_rank.iter().enumerate() {
        for (seq, l) in seqs {
            let better = match reference.get(seq) {
                None => true,
                Some(&o) => {
                    let len = |x: usize| {
                        per_rank[x]
                            .iter()
                            .find(|s| s.0 == *seq)
                            .map_or(0, |s| s.1.len())
                    };
                    let home = |x: usize| ranks[x].domain == Some(0);
                    (home(r), l.len()) > (home(o), len(o))
                }
            };
            if better {
                reference.insert(*seq, r);
            }
        }
    }

    reference
}

/// Says, in `notes`, each sequence whose count differs between ranks; returns the sequences in id order.
fn count_notes(
    ranks: &[RankView<'_>],
    per_rank: &[RankSequences],
    seq_name: &dyn Fn(u32) -> String,
    notes: &mut Vec<String>,
) -> Vec<u32> {
    let mut counts: HashMap<u32, Vec<(u32, usize)>> = HashMap::new();
    for (r, seqs) in per_rank.iter().enumerate() {
        for (seq, l) in seqs {
            counts
                .entry(*seq)
                .or_default()
                .push((ranks[r].rank, l.len()));
        }
    }
    let mut seq_order: Vec<u32> = counts.keys().copied().collect();
    seq_order.sort_unstable();
    for seq in &seq_order {
        let c = &counts[seq];
        let mut tally: HashMap<usize, usize> = HashMap::new();
        for (_, n) in c {
            *tally.entry(*n).or_default() += 1;
        }
        if tally.len() > 1 {
            let (&usual, &on) = tally
                .iter()
                .max_by_key(|(n, k)| (**k, **n))
                .unwrap_or((&0, &0));
            let mut others: Vec<(usize, Vec<u32>)> = Vec::new();
            for (rank, n) in c.iter().filter(|(_, n)| *n != usual) {
                match others.iter_mut().find(|o| o.0 == *n) {
                    Some(o) => o.1.push(*rank),
                    None => others.push((*n, vec![*rank])),
                }
            }
            others.sort_unstable();
            let rest: Vec<String> = others
                .iter()
                .map(|(n, rs)| {
                    let which = if rs.len() == 1 { "rank" } else { "ranks" };
                    format!("{n} on {which} {}", rank_list(rs))
                })
                .collect();
            notes.push(format!(
                "the ranks ran different numbers of {}: {usual} on {on} {}, {}; matched by their ends, those \
                 without a partner on another rank count for nothing",
                seq_name(*seq),
                if on == 1 { "rank" } else { "ranks" },
                rest.join(", ")
            ));
        }
    }

    seq_order
}

/// Each rank's collectives placed in their sequence's reference rank's; the (rank, sequence) that could not be.
fn place_sequences(
    ranks: &[RankView<'_>],
    anchor_shifts: &[i64],
    per_rank: &[RankSequences],
    reference: &HashMap<u32, usize>,
) -> (Vec<Entry>, Vec<(u32, u32)>) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut unplaced: Vec<(u32, u32)> = Vec::new();
    for (r, seqs) in per_rank.iter().enumerate() {
        for (seq, l) in seqs {
            let reference_rank = reference[seq];
            let lag = if reference_rank == r {
                Some(0i64)
            } else {
                let Some((_, ref_list)) = per_rank[reference_rank].iter().find(|s| s.0 == *seq)
                else {
                    continue;
                };
                let theirs = ends(ranks, anchor_shifts, reference_rank, ref_list);
                let mine = ends(ranks, anchor_shifts, r, l);
                place(&mine, &theirs)
            };
            let Some(lag) = lag else {
                unplaced.push((ranks[r].rank, *seq));
                continue;
            };
            for (i, &local) in l.iter().enumerate() {
                let c = ranks[r].stream.collectives[local as usize];
                let shift = anchor_shifts[r];
                entries.push(Entry {
                    seq: *seq,
                    index: i as i64 + lag,
                    rank: u32::try_from(r).unwrap_or(u32::MAX),
                    local,
                    start: on_clock(c.start, shift),
                    end: on_clock(c.end, shift),
                });
            }
        }
    }
    (entries, unplaced)
}

/// Moves the hosts until the ends of each collective (`entries`, sorted by sequence and index) agree: each host's
/// correction, and what remains.
fn move_hosts(
    ranks: &[RankView<'_>],
    hosts: &[(String, String)],
    anchor_shifts: &[i64],
    entries: &[Entry],
) -> Vec<HostAlignment> {
    let domains = hosts.len();
    let mut correction = vec![0i64; domains];
    let dom = |e: &Entry| ranks[e.rank as usize].domain;
    let differences = |correction: &[i64]| -> Vec<Vec<i64>> {
        let mut diffs: Vec<Vec<i64>> = vec![Vec::new(); domains];
        let mut ends: Vec<i64> = Vec::new();
        for group in entries.chunk_by(|a, b| (a.seq, a.index) == (b.seq, b.index)) {
            let first = group.iter().find_map(dom);
            if !group.iter().any(|e| dom(e).is_some() && dom(e) != first) {
                continue;
            }
            ends.clear();
            ends.extend(
                group
                    .iter()
                    .filter_map(|e| dom(e).map(|d| e.end.saturating_add(correction[d]))),
            );
            let Some(mid) = median_i64(&mut ends) else {
                continue;
            };
            for e in group {
                if let Some(d) = dom(e) {
                    diffs[d].push(mid.saturating_sub(e.end.saturating_add(correction[d])));
                }
            }
        }
        diffs
    };
    for _ in 0..8 {
        let mut diffs = differences(&correction);
        let mut largest = 0i64;
        for d in 0..domains {
            if let Some(step) = median_i64(&mut diffs[d]) {
                correction[d] = correction[d].saturating_add(step);
                largest = largest.max(step.saturating_abs());
            }
        }
        if largest < 10 {
            break;
        }
    }
    let diffs = differences(&correction);
    let base = if diffs.first().is_some_and(|d| !d.is_empty()) {
        correction[0]
    } else {
        0
    };
    for c in &mut correction {
        *c = c.saturating_sub(base);
    }
    let mut aligned_hosts = Vec::with_capacity(domains);
    for (d, (host, boot)) in hosts.iter().enumerate() {
        let collectives = diffs[d].len() as u64;
        let mut residual: Vec<u64> = diffs[d].iter().map(|x| x.unsigned_abs()).collect();
        aligned_hosts.push(HostAlignment {
            host: host.clone(),
            boot_id: boot.clone(),
            anchor_shift: anchor_shifts
                .iter()
                .zip(ranks)
                .find(|(_, r)| r.domain == Some(d))
                .map_or(0, |(s, _)| *s),
            correction: if collectives > 0 { correction[d] } else { 0 },
            collectives,
            residual: p90(&mut residual),
        });
    }

    aligned_hosts
}

/// What the alignment did and could not do, in words, into `notes`.
fn alignment_notes(
    ranks: &[RankView<'_>],
    hosts: &[(String, String)],
    entries: &[Entry],
    reference: &HashMap<u32, usize>,
    aligned_hosts: &[HostAlignment],
    notes: &mut Vec<String>,
) {
    let any_collective = ranks.iter().any(|r| !r.stream.collectives.is_empty());
    if !any_collective {
        notes.push(
            "no NCCL collective kernels in the trace: hosts aligned on clock anchors only".into(),
        );
    } else if hosts.len() > 1 {
        // The interval between two collectives of the longest sequence of the reference host, for the flag.
        let interval = entries
            .chunk_by(|a, b| a.seq == b.seq)
            .max_by_key(|g| g.len())
            .and_then(|g| {
                let r = reference.get(&g[0].seq).copied()?;
                let mut starts: Vec<i64> = g
                    .iter()
                    .filter(|e| e.rank as usize == r)
                    .map(|e| e.start)
                    .collect();
                starts.sort_unstable();
                let mut gaps: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
                median_i64(&mut gaps)
            });
        for (d, h) in aligned_hosts.iter().enumerate() {
            let name = host_label(hosts, d);
            if h.collectives == 0 {
                notes.push(format!(
                    "host {name} shares no matched collective with the other hosts: aligned on clock anchors only"
                ));
                continue;
            }
            let within = crate::report::align::duration(h.residual);
            if d == 0 {
                notes.push(format!(
                    "host {name} is the reference: its collective ends agree with the others' within {within} \
                     (90th percentile of {} collectives)",
                    h.collectives
                ));
                continue;
            }
            notes.push(format!(
                "host {name} moved by {} on its collectives, beyond the clock anchors' {}; collective ends agree \
                 within {within} (90th percentile of {} collectives)",
                signed_duration(h.correction),
                signed_duration(h.anchor_shift),
                h.collectives
            ));
            if let Some(interval) = interval.filter(|i| *i > 0) {
                if h.correction.unsigned_abs() > interval.unsigned_abs() / 4 {
                    notes.push(format!(
                        "host {name}'s move ({}) is more than a quarter of the interval between two collectives \
                         ({}): its clock anchors disagree with the others' by that much, and its collectives may \
                         be matched whole collectives off",
                        signed_duration(h.correction),
                        crate::report::align::duration(interval.unsigned_abs())
                    ));
                }
            }
        }
    }
}

/// How far outside the other rank's span an end may lie and still have a partner there, for a sequence of one
/// collective (no interval between two to go by).
const SINGLE_REACH_NS: i64 = 1_000_000_000;

/// Where `mine` (ends in time order) lies in `theirs`: the lag `j - i` that most of its ends' nearest ends in
/// `theirs` agree on, where more than half do; `None` otherwise (or where the spans do not overlap: an end more
/// than half the median interval between two of `theirs` outside their span has no partner there).
fn place(mine: &[i64], theirs: &[i64]) -> Option<i64> {
    let mut gaps: Vec<i64> = theirs.windows(2).map(|w| w[1] - w[0]).collect();
    let reach = median_i64(&mut gaps).map_or(SINGLE_REACH_NS, |g| g / 2);
    let (first, last) = (theirs.first()? - reach, theirs.last()? + reach);
    let mut votes: HashMap<i64, usize> = HashMap::new();
    let mut voters = 0usize;
    for (i, &e) in mine.iter().enumerate() {
        if e < first || e > last {
            continue;
        }
        let j = theirs.partition_point(|&t| t < e);
        let nearest = match (j.checked_sub(1), theirs.get(j)) {
            (Some(p), Some(&n)) => {
                if (e - theirs[p]).abs() <= (n - e).abs() {
                    p
                } else {
                    j
                }
            }
            (Some(p), None) => p,
            (None, _) => j,
        };
        *votes.entry(nearest as i64 - i as i64).or_default() += 1;
        voters += 1;
    }
    let (&lag, &n) = votes.iter().max_by_key(|(lag, n)| (**n, -lag.abs()))?;
    (n * 2 > voters).then_some(lag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_is_placed_by_its_nearest_ends() {
        let theirs: Vec<i64> = (0..20).map(|i| i * 1_000).collect();
        // Three later, 120 ns off: lag 3.
        let mine: Vec<i64> = (3..15).map(|i| i * 1_000 + 120).collect();
        assert_eq!(place(&mine, &theirs), Some(3));
        // Halfway between: no majority.
        let halfway: Vec<i64> = (0..10).map(|i| i * 1_000 + 500 + (i % 2) * 2 - 1).collect();
        assert_eq!(place(&halfway, &theirs), None);
        // Disjoint spans.
        let later: Vec<i64> = (0..5).map(|i| 100_000 + i).collect();
        assert_eq!(place(&later, &theirs), None);
        // One collective each, apart by less than a second: partners.
        assert_eq!(place(&[5_000_000], &[5_030_000]), Some(0));
        assert_eq!(place(&[5_000_000], &[2_000_000_000]), None);
    }

    #[test]
    fn medians_percentiles_and_rank_lists() {
        assert_eq!(median_i64(&mut [3, 1, 2]), Some(2));
        assert_eq!(median_i64(&mut [4, 1, 3, 2]), Some(2));
        assert_eq!(median_i64(&mut []), None);
        assert_eq!(p90(&mut (1..=10).collect::<Vec<u64>>()), 9);
        assert_eq!(p90(&mut [5]), 5);
        assert_eq!(rank_list(&[7, 3, 5, 6, 0]), "0, 3, 5-7");
        assert_eq!(
            rank_list(&[0, 2, 4, 6, 8, 10, 12, 14, 16, 18]),
            "0, 2, 4, 6, 8, 10, 12, 14 and 2 more"
        );
    }
}
