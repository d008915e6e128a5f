//! A diff as text: the sides' figures in columns, then each list of changes.

use std::io::{self, Write};
use std::path::PathBuf;

use gpu_tools::trace::analyze::IdleCause;
use gpu_tools::trace::diff::{Change, Diff, Process, Profile, Select};

use super::select_text;
use crate::commands::analyze::short;

/// Longest name written whole; longer ones are cut.
const MAX_NAME: usize = 90;

fn duration(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A count: whole where it is (`198`), else with two decimals below ten (`0.05`), one above (`62.2`).
fn number(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// `+12.3 µs (+8%)`, `-2 (-50%)`.
fn change(a: f64, b: f64, time: bool) -> String {
    let delta = b - a;
    let sign = if delta >= 0.0 { "+" } else { "-" };
    let size = if time {
        duration(delta.abs())
    } else {
        number(delta.abs())
    };
    if a == 0.0 {
        return format!("{sign}{size}");
    }
    format!("{sign}{size} ({sign}{:.0}%)", 100.0 * delta.abs() / a)
}

/// A side's value per step (where the diff compares per step), else its total.
fn per(v: u64, p: &Profile, d: &Diff) -> f64 {
    if d.per_step && p.steps > 0 {
        v as f64 / p.steps as f64
    } else {
        v as f64
    }
}

fn row(out: &mut impl Write, what: &str, a: f64, b: f64, time: bool) -> io::Result<()> {
    let show = |v: f64| if time { duration(v) } else { number(v) };
    writeln!(
        out,
        "  {what:<28} {:>14} {:>14}   {}",
        show(a),
        show(b),
        change(a, b, time)
    )
}

fn sides(out: &mut impl Write, d: &Diff) -> io::Result<()> {
    let (a, b) = (&d.a, &d.b);
    writeln!(out, "  {:<28} {:>14} {:>14}   B - A", "", "A", "B")?;
    row(out, "steps", a.steps as f64, b.steps as f64, false)?;
    row(
        out,
        "step (median)",
        a.step_median as f64,
        b.step_median as f64,
        true,
    )?;
    row(
        out,
        "step (p90)",
        a.step_p90 as f64,
        b.step_p90 as f64,
        true,
    )?;
    let unit = if d.per_step { " a step" } else { "" };
    row(
        out,
        &format!("GPU busy{unit}"),
        per(a.busy, a, d),
        per(b.busy, b, d),
        true,
    )?;
    row(
        out,
        &format!("GPU idle{unit}"),
        per(a.idle, a, d),
        per(b.idle, b, d),
        true,
    )?;
    for cause in IdleCause::ALL {
        let (x, y) = (
            a.idle_by_cause.get(&cause).copied().unwrap_or(0),
            b.idle_by_cause.get(&cause).copied().unwrap_or(0),
        );
        if x + y > 0 {
            row(
                out,
                &format!("  idle: {}", cause.id()),
                per(x, a, d),
                per(y, b, d),
                true,
            )?;
        }
    }
    let kernels = |p: &Profile| p.kernels.values().map(|t| t.time).sum::<u64>();
    let api = |p: &Profile| p.api.values().map(|t| t.time).sum::<u64>();
    row(
        out,
        &format!("kernel time{unit}"),
        per(kernels(a), a, d),
        per(kernels(b), b, d),
        true,
    )?;
    row(
        out,
        &format!("API time{unit}"),
        per(api(a), a, d),
        per(api(b), b, d),
        true,
    )
}

/// Writes the first `top` changes, and how many more there are.
fn list(
    out: &mut impl Write,
    title: &str,
    changes: &[Change],
    d: &Diff,
    time: bool,
    top: usize,
) -> io::Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let unit = if d.per_step { ", a step" } else { "" };
    writeln!(out)?;
    writeln!(out, "{title}{unit}:")?;
    writeln!(
        out,
        "  {:>12} {:>12} {:>12} {:>12}   {:<24} name",
        "A count", "B count", "A time", "B time", "change"
    )?;
    for c in changes.iter().take(top) {
        let (ac, bc) = (per(c.a.count, &d.a, d), per(c.b.count, &d.b, d));
        let (at, bt) = (per(c.a.time, &d.a, d), per(c.b.time, &d.b, d));
        let change = if time {
            change(at, bt, true)
        } else {
            change(ac, bc, false)
        };
        writeln!(
            out,
            "  {:>12} {:>12} {:>12} {:>12}   {:<24} {}",
            number(ac),
            number(bc),
            duration(at),
            duration(bt),
            change,
            short(&c.name, MAX_NAME)
        )?;
    }
    if changes.len() > top {
        writeln!(
            out,
            "  and {} more (`--top 0` lists them)",
            changes.len() - top
        )?;
    }
    Ok(())
}

/// A side's processes: `rank 0 (pid 1886)`, `pid 1611`; a process whose pid and rank another of the side shares
/// (two containers, a pid used again) with its stream: `pid 100 (stream 1)`.
fn processes(p: &Profile) -> Vec<String> {
    let shared = |q: &Process| {
        p.processes
            .iter()
            .filter(|o| (o.pid, o.rank) == (q.pid, q.rank))
            .count()
            > 1
    };
    p.processes
        .iter()
        .map(|q| {
            let stream = if shared(q) {
                format!(", stream {}", q.stream)
            } else {
                String::new()
            };
            match q.rank {
                Some(r) => format!("rank {r} (pid {}{stream})", q.pid),
                None if stream.is_empty() => format!("pid {}", q.pid),
                None => format!("pid {} (stream {})", q.pid, q.stream),
            }
        })
        .collect()
}

/// Writes the diff of the two sides (file and selection of each), the first `top` changes of each list.
pub fn write(
    out: &mut impl Write,
    files: [(&PathBuf, Select); 2],
    d: &Diff,
    top: usize,
) -> io::Result<()> {
    for ((path, select), (side, p)) in files.iter().zip([("A", &d.a), ("B", &d.b)]) {
        let who = processes(p);
        writeln!(
            out,
            "{side}: {} [{}]: {} on {} GPU{}, {} analysed",
            path.display(),
            select_text(*select),
            who.join(", "),
            p.gpus,
            if p.gpus == 1 { "" } else { "s" },
            duration(p.window as f64)
        )?;
    }
    if !d.per_step {
        writeln!(out, "(a side has no steps: totals are compared, not steps)")?;
    }
    writeln!(out)?;
    sides(out, d)?;
    list(
        out,
        "Kernels whose time changed most",
        &d.kernels_by_time,
        d,
        true,
        top,
    )?;
    list(
        out,
        "Kernels whose count changed most",
        &d.kernels_by_count,
        d,
        false,
        top,
    )?;
    list(out, "Kernels new in B", &d.new_kernels, d, true, top)?;
    list(out, "Kernels gone from A", &d.gone_kernels, d, true, top)?;
    list(
        out,
        "API functions whose time changed most",
        &d.api,
        d,
        true,
        top,
    )?;
    // A handful of kinds, which `diff` keeps whole whatever the limit.
    list(
        out,
        "Copies, sets and graph launches",
        &d.copies,
        d,
        true,
        usize::MAX,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_that_share_a_pid_are_each_named_with_their_stream() {
        let process = |stream, pid, rank| Process {
            file: 0,
            stream,
            pid,
            rank,
        };
        let side = |processes| Profile {
            processes,
            ..Profile::default()
        };
        // Unique pids: as before.
        assert_eq!(
            processes(&side(vec![
                process(0, 1886, Some(0)),
                process(1, 1611, None)
            ])),
            ["rank 0 (pid 1886)", "pid 1611"]
        );
        // Pid 100 twice: each with its stream.
        assert_eq!(
            processes(&side(vec![
                process(0, 100, None),
                process(1, 100, None),
                process(2, 100, Some(3)),
            ])),
            [
                "pid 100 (stream 0)",
                "pid 100 (stream 1)",
                "rank 3 (pid 100)"
            ]
        );
    }
}
