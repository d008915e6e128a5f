use super::*;

#[test]
fn output_names_expand_host_and_pid() {
    assert_eq!(
        expand_output_name("t-%h-%p.gputrace", "node7", 42),
        "t-node7-42.gputrace"
    );
    assert_eq!(expand_output_name("100%%-%x%", "h", 1), "100%-%x%");
    assert_eq!(expand_output_name("t-%r", "h", 1), "t-%r");
}

#[test]
fn output_names_expand_the_rank_where_known() {
    assert_eq!(
        expand_output_name_with_rank("run-%h-%r.gputrace", "node7", 42, Some("13")),
        "run-node7-13.gputrace"
    );
    assert_eq!(
        expand_output_name_with_rank("%%r-%r", "h", 1, Some("0-3")),
        "%r-0-3"
    );
    assert_eq!(expand_output_name_with_rank("t-%r", "h", 1, None), "t-%r");
}
