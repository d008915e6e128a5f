//! The crate page (the `//!` docs of `src/lib.rs`) shows the README's examples: every code block on the page is
//! also in the README, word for word, so the two cannot drift apart. Both are compiled as doctests.

use std::path::Path;

/// The fenced code blocks of a Markdown text: (info string, body).
fn code_blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), Vec::new())),
            (Some(_), Some(_)) => {
                if let Some((info, body)) = open.take() {
                    blocks.push((info, body.join("\n")));
                }
            }
            (Some((_, body)), None) => body.push(line),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code block");
    blocks
}

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The crate-level docs of `src/lib.rs`, as Markdown.
fn crate_page() -> String {
    read("src/lib.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_example_on_the_crate_page_is_in_the_readme() {
    let page = code_blocks(&crate_page());
    let readme = code_blocks(&read("README.md"));
    let rust: Vec<_> = page
        .iter()
        .filter(|(info, _)| info.starts_with("rust"))
        .collect();
    assert!(
        rust.len() >= 4,
        "one example per API: {} blocks",
        rust.len()
    );
    for (info, body) in rust {
        assert!(
            readme.iter().any(|(i, b)| i == info && b == body),
            "this example of the crate page is not in README.md (```{info}):\n{body}"
        );
    }
}

#[test]
fn code_blocks_are_found() {
    let text = "a\n```rust,no_run\nfn main() {}\n```\nb\n```text\nx\ny\n```\n";
    assert_eq!(
        code_blocks(text),
        [
            ("rust,no_run".to_string(), "fn main() {}".to_string()),
            ("text".to_string(), "x\ny".to_string())
        ]
    );
}
