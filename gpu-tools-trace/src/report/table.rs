//! A report table and its renderings as text, CSV and JSON (written by hand: the library takes no JSON
//! dependency).

use std::io::{self, Write};

/// One value of a table.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
pub enum Cell {
    /// Text.
    Text(String),
    /// A whole number (nanoseconds, counts, bytes).
    Int(u64),
    /// A number with a fraction (averages, megabytes, percentages).
    Float(f64),
    /// A value the data does not give (a metric that was not sampled): `-` as text, an empty CSV field, JSON
    /// `null`.
    Missing,
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Int(v) => v.to_string(),
            Cell::Float(v) => format!("{v:.3}"),
            Cell::Missing => "-".to_string(),
        }
    }

    /// Numbers (and missing values, which stand in a column of numbers) are right-aligned.
    fn is_number(&self) -> bool {
        !matches!(self, Cell::Text(_))
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_string())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::Int(v)
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Self {
        Cell::Float(v)
    }
}

/// A report: a named table, as Nsight Systems' `nsys stats` prints them.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Table {
    /// Short name (`cuda_gpu_kern_sum`, ...): the name of Nsight Systems' report of the same content.
    pub name: &'static str,
    /// Title.
    pub title: String,
    /// Column headings.
    pub columns: Vec<&'static str>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
    /// Remarks shown under the table (what is missing and why).
    pub notes: Vec<String>,
}

/// How a table is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Aligned columns for a terminal.
    Text,
    /// Comma-separated values with a heading line (RFC 4180 quoting).
    Csv,
    /// A JSON object: `{"name", "title", "columns", "rows": [{column: value}], "notes"}`.
    Json,
}

impl Format {
    /// Every format's name.
    pub const NAMES: [&'static str; 3] = ["text", "csv", "json"];
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown format {s:?}; known: text, csv, json")),
        }
    }
}

impl Table {
    /// An empty table.
    pub fn new(name: &'static str, title: impl Into<String>, columns: Vec<&'static str>) -> Self {
        Table {
            name,
            title: title.into(),
            columns,
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Writes the table in `format`.
    pub fn write(&self, format: Format, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => self.write_text(out),
            Format::Csv => self.write_csv(out),
            Format::Json => self.write_json(out),
        }
    }

    /// Aligned columns, numbers right-aligned, the last column (a name) left-aligned.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "** {} ({}):", self.title, self.name)?;
        writeln!(out)?;
        if self.rows.is_empty() {
            writeln!(out, "   (no data)")?;
        } else {
            let cells: Vec<Vec<String>> = self
                .rows
                .iter()
                .map(|r| r.iter().map(Cell::text).collect())
                .collect();
            let mut widths: Vec<usize> = self.columns.iter().map(|c| c.len()).collect();
            for r in &cells {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
            let last = self.columns.len().saturating_sub(1);
            let line =
                |out: &mut dyn Write, items: &[String], numeric: &[bool]| -> io::Result<()> {
                    let mut text = String::new();
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            text.push_str("  ");
                        }
                        let w = widths[i];
                        if i == last {
                            text.push_str(item);
                        } else if numeric[i] {
                            text.push_str(&format!("{item:>w$}"));
                        } else {
                            text.push_str(&format!("{item:<w$}"));
                        }
                    }
                    writeln!(out, " {}", text.trim_end())
                };
            let numeric: Vec<bool> = (0..self.columns.len())
                .map(|i| {
                    self.rows
                        .iter()
                        .all(|r| r.get(i).is_some_and(Cell::is_number))
                })
                .collect();
            let heads: Vec<String> = self.columns.iter().map(|c| c.to_string()).collect();
            line(out, &heads, &numeric)?;
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            line(out, &rule, &numeric)?;
            for r in &cells {
                line(out, r, &numeric)?;
            }
        }
        for n in &self.notes {
            writeln!(out, "   note: {n}")?;
        }
        writeln!(out)
    }

    /// CSV: a heading line, then one line per row.
    pub fn write_csv(&self, out: &mut dyn Write) -> io::Result<()> {
        let heads: Vec<String> = self.columns.iter().map(|c| csv_field(c)).collect();
        writeln!(out, "{}", heads.join(","))?;
        for r in &self.rows {
            let fields: Vec<String> = r
                .iter()
                .map(|c| match c {
                    Cell::Text(s) => csv_field(s),
                    Cell::Float(v) => format!("{v}"),
                    Cell::Int(v) => v.to_string(),
                    Cell::Missing => String::new(),
                })
                .collect();
            writeln!(out, "{}", fields.join(","))?;
        }
        Ok(())
    }

    /// One JSON object.
    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        write!(
            out,
            "{{\"name\":{},\"title\":{},\"columns\":[",
            json_string(self.name),
            json_string(&self.title)
        )?;
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(json_string(c).as_bytes())?;
        }
        out.write_all(b"],\"rows\":[")?;
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"{")?;
            for (j, (c, v)) in self.columns.iter().zip(r).enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{}:{}", json_string(c), json_value(v))?;
            }
            out.write_all(b"}")?;
        }
        out.write_all(b"],\"notes\":[")?;
        for (i, n) in self.notes.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(json_string(n).as_bytes())?;
        }
        out.write_all(b"]}")
    }
}

/// Writes several tables: text and CSV one after another (CSV tables separated by a blank line, preceded by
/// a `# name` line and followed by a `# note: ...` line per note), JSON as one array.
pub fn write_tables(tables: &[Table], format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => {
            out.write_all(b"[")?;
            for (i, t) in tables.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",\n")?;
                }
                t.write_json(out)?;
            }
            out.write_all(b"]\n")
        }
        Format::Csv => {
            for (i, t) in tables.iter().enumerate() {
                if i > 0 {
                    writeln!(out)?;
                }
                writeln!(out, "# {}", t.name)?;
                t.write_csv(out)?;
                // What the text and JSON say under the table (why it is empty, what an empty field stands for)
                // is part of the report.
                for n in &t.notes {
                    writeln!(out, "# note: {}", n.replace(['\n', '\r'], " "))?;
                }
            }
            Ok(())
        }
        Format::Text => {
            for t in tables {
                t.write_text(out)?;
            }
            Ok(())
        }
    }
}

/// A CSV field, quoted (RFC 4180) where it holds a comma, a quote or a line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn json_value(c: &Cell) -> String {
    match c {
        Cell::Text(s) => json_string(s),
        Cell::Int(v) => v.to_string(),
        Cell::Float(v) if v.is_finite() => format!("{v}"),
        Cell::Float(_) | Cell::Missing => "null".to_string(),
    }
}

/// A JSON string literal: the crate's one writer of them ([`crate::profile::json_str`]).
pub(crate) use crate::profile::json_str as json_string;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_value_is_a_dash_an_empty_field_and_null() {
        let mut t = Table::new("t", "T", vec!["A (%)", "B (%)", "Name"]);
        t.rows
            .push(vec![Cell::Float(12.5), Cell::Missing, "k".into()]);
        t.rows
            .push(vec![Cell::Missing, Cell::Float(1.0), "long".into()]);
        let text = |f: Format| {
            let mut out = Vec::new();
            t.write(f, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        // Right-aligned with the numbers of its column.
        assert!(
            text(Format::Text).contains("\n 12.500      -  k\n      -  1.000  long\n"),
            "{}",
            text(Format::Text)
        );
        assert_eq!(text(Format::Csv), "A (%),B (%),Name\n12.5,,k\n,1,long\n");
        assert!(text(Format::Json).contains(r#"{"A (%)":12.5,"B (%)":null,"Name":"k"}"#));
    }
}
