use super::*;

#[test]
fn output_names_expand_host_and_pid() {
    assert_eq!(
        expand_output_name("t-%h-%p.gputrace", "node7", 42),
        "t-node7-42.gputrace"
    );
    assert_eq!(expand_output_name("100%%-%x%", "h", 1), "100%-%x%");
}
