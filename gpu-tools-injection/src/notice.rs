//! Notices whose numbers the tool reads back (the stream carries notices as text; these are written and read
//! here, in one place, so that the two sides cannot drift apart).

/// The notice of an attached trace's writer for records CUPTI gave at the window's last flush without an end time
/// (work still queued or running): left out of the trace.
pub fn unfinished_left_out(n: u64) -> String {
    format!(
        "{n} records of work that had not finished when the window closed left out (CUPTI gave them without an \
         end time)"
    )
}

/// The count of an [`unfinished_left_out`] notice; `None` for any other text.
pub fn unfinished_left_out_count(text: &str) -> Option<u64> {
    let (n, rest) = text.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    (unfinished_left_out(n).split_once(' ')?.1 == rest).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_read_back_from_its_own_notice_only() {
        assert_eq!(
            unfinished_left_out_count(&unfinished_left_out(760)),
            Some(760)
        );
        assert_eq!(unfinished_left_out_count("760 records dropped"), None);
        assert_eq!(
            unfinished_left_out_count("many records of work that had not finished"),
            None
        );
    }
}
