//! Looking up the function that covers a PC, as a core dump's lanes need it: the sorted [`SymbolTable`] (one sort,
//! then a binary search per lookup) against the linear scan (`elf::function_at`) each lookup used to make, on
//! tables the size of a small and of a large CUDA module, in one run. Runs without a GPU.
//!
//! `cargo bench --bench symbol_lookup`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gpu_tools::coredump::elf::{self, FunctionSymbol, SymbolTable};

/// `n` functions of 64 to 4096 bytes, back to back, in a shuffled order (as an image lists them), and the PCs of
/// 1024 lanes spread over them.
fn module(n: usize) -> (Vec<FunctionSymbol>, Vec<u64>) {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut at = 0x7f00_0000_0000u64;
    let mut symbols: Vec<FunctionSymbol> = (0..n)
        .map(|i| {
            let size = 64 + next(4032) / 16 * 16;
            let s = FunctionSymbol {
                name: format!("_Z8kernel{i}Pf"),
                value: at,
                size,
            };
            at += size;
            s
        })
        .collect();
    for i in (1..symbols.len()).rev() {
        symbols.swap(i, next(i as u64 + 1) as usize);
    }
    let first = 0x7f00_0000_0000u64;
    let pcs = (0..1024).map(|_| first + next(at - first)).collect();
    (symbols, pcs)
}

fn lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("1024 lane PCs to their function");
    for n in [64usize, 4096] {
        let (symbols, pcs) = module(n);
        let table = SymbolTable::new(symbols.clone());
        g.bench_with_input(
            BenchmarkId::new("SymbolTable (binary search)", n),
            &pcs,
            |b, pcs| {
                b.iter(|| {
                    pcs.iter()
                        .filter_map(|&pc| black_box(&table).function_at(pc))
                        .count()
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("linear scan (baseline)", n),
            &pcs,
            |b, pcs| {
                b.iter(|| {
                    pcs.iter()
                        .filter_map(|&pc| elf::function_at(black_box(&symbols), pc))
                        .count()
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("SymbolTable::new (sort once)", n),
            &symbols,
            |b, s| b.iter(|| SymbolTable::new(black_box(s.clone())).len()),
        );
    }
    g.finish();
}

criterion_group!(benches, lookup);
criterion_main!(benches);
