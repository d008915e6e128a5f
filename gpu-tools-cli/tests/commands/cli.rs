//! The command line as a whole: every subcommand describes itself and exits 2 on a bad argument, the tools'
//! former names still run their subcommand, the subcommands that moved out say where, and errors are the
//! `Display` text of the library's errors.

use std::process::{Command, Output};

const SUBCOMMANDS: [&str; 14] = [
    "doctor",
    "trace",
    "where",
    "coredump",
    "freeze",
    "metrics",
    "top",
    "profile",
    "stats",
    "export",
    "analyze",
    "diff",
    "completions",
    "man",
];

fn gpu_tools(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .output()
        .expect("run gpu-tools")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_top_level_help_lists_every_subcommand() {
    let out = gpu_tools(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for sub in SUBCOMMANDS {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{sub} "))),
            "{sub} is not listed:\n{help}"
        );
    }
    let none = gpu_tools(&[]);
    assert_eq!(none.status.code(), Some(2), "a subcommand is required");
}

#[test]
fn every_subcommand_describes_itself() {
    let description = "GPU tools on the command line";
    let mut abouts = Vec::new();
    for sub in SUBCOMMANDS {
        let out = gpu_tools(&[sub, "--help"]);
        let help = text(&out.stdout);
        assert!(out.status.success(), "{sub}: {}", text(&out.stderr));
        assert!(
            help.contains(&format!("Usage: gpu-tools {sub}")),
            "{sub}: {help}"
        );
        let about = help.lines().next().unwrap_or_default().to_string();
        assert!(
            !about.is_empty() && !about.starts_with(description) && !about.starts_with("Usage"),
            "{sub} opens with {about:?}"
        );
        abouts.push(about);
    }
    abouts.sort();
    abouts.dedup();
    assert_eq!(abouts.len(), SUBCOMMANDS.len(), "each its own: {abouts:?}");
}

#[test]
fn the_version_is_the_tools_under_every_subcommand() {
    let version = format!(
        "gpu-tools {} (CUPTI: not found; CUDA driver: not found)\n",
        env!("CARGO_PKG_VERSION")
    );
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .args(args)
            .env("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")
            .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
            .output()
            .unwrap()
    };
    let top = run(&["--version"]);
    assert!(top.status.success());
    assert_eq!(text(&top.stdout), version);
    for sub in SUBCOMMANDS {
        let out = run(&[sub, "--version"]);
        assert!(out.status.success(), "{sub}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), version, "{sub}");
    }
}

#[test]
fn a_bad_argument_exits_2_with_the_subcommands_usage() {
    for sub in SUBCOMMANDS {
        let out = gpu_tools(&[sub, "--no-such-option"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sub}: {stderr}");
        assert!(
            stderr.contains(&format!("Usage: gpu-tools {sub}")),
            "{sub}: {stderr}"
        );
    }
}

#[test]
fn the_former_names_run_their_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    for (name, sub) in [
        ("cuda_trace", "trace"),
        ("cuda_where", "where"),
        ("cuda_coredump", "coredump"),
        ("cuda_freeze", "freeze"),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gpu-tools"), &link).unwrap();
        let out = Command::new(&link).arg("--help").output().unwrap();
        assert!(out.status.success(), "{name}");
        assert!(
            text(&out.stdout).contains(&format!("Usage: gpu-tools {sub}")),
            "{name}: {}",
            text(&out.stdout)
        );
    }
    // Under its own name, or any other, it is the whole tool.
    let other = dir.path().join("my-gpu-tools");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gpu-tools"), &other).unwrap();
    let out = Command::new(&other).arg("--help").output().unwrap();
    assert!(text(&out.stdout).contains("Usage: gpu-tools <COMMAND>"));
}

#[test]
fn doctor_reports_every_api_and_exits_0_without_a_gpu() {
    // Every folder doctor could write to is in here: it must stay empty (doctor is a diagnostic).
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("xdg");
    let tmp = home.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["doctor", "--json"])
        .env("XDG_CACHE_HOME", &cache)
        .env("HOME", home.path())
        .env("TMPDIR", &tmp)
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .env_remove("GPU_TOOLS_INJECT_ROCM_LIB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let apis: Vec<&str> = report["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["api"].as_str().unwrap())
        .collect();
    assert_eq!(
        apis,
        [
            "CUPTI checkpoint",
            "CUPTI",
            "CUPTI counters",
            "CUDA debugger API",
            "CUDA driver",
            "rocprofiler-sdk",
            "rocprofiler v2"
        ]
    );
    // The injection library `trace` would use: the embedded one, and where it would be written on first use.
    let injection = &report["injection_library"];
    assert_eq!(injection["found"], true, "{injection}");
    let detail = injection["detail"].as_str().unwrap();
    let folder = cache.join("gpu-tools").display().to_string();
    assert!(
        detail.starts_with("embedded in gpu-tools (")
            && detail.contains(&format!("written to {folder}/libgpu_tools_inject-"))
            && detail.ends_with(".so on first use (that folder can take it)"),
        "{detail}"
    );
    let rocm = report["amd_tool_library"]["detail"].as_str().unwrap();
    assert!(
        rocm.contains(&format!("written to {folder}/libgpu_tools_inject_rocm-")),
        "{rocm}"
    );
    let table = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["doctor", "--verbose"])
        .env("XDG_CACHE_HOME", &cache)
        .env("HOME", home.path())
        .env("TMPDIR", &tmp)
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .output()
        .unwrap();
    assert!(table.status.success());
    assert!(
        text(&table.stdout)
            .contains("Injection library (trace --backend cupti): embedded in gpu-tools")
    );
    // Nothing was written anywhere: no cache folder, no file in the temporary folder.
    let mut left: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["tmp"], "doctor made nothing in HOME");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "nor in TMPDIR");
}

/// `record`, `replay` and `rocprof` left the tool for a repository task and the library's examples: their old
/// command lines, and the former executable names that ran them, say where each went, exit 2 and do nothing.
#[test]
fn the_subcommands_that_moved_out_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let json = json.to_str().unwrap();
    for (args, home) in [
        (
            vec!["record", "--out", json],
            "`cargo xtask record --out DIR`",
        ),
        (vec!["record"], "`cargo xtask record --out DIR`"),
        (
            vec!["replay", "--json", json, "--bytes", "4M"],
            "example `checkpoint_replay`",
        ),
        (vec!["replay", "--help"], "example `checkpoint_replay`"),
        (vec!["rocprof", "--output", json], "example `rocprof_trace`"),
    ] {
        let out = gpu_tools(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("gpu-tools {}: moved out of gpu-tools: ", args[0])),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains(home), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    for (name, home) in [
        ("checkpoint_replay", "example `checkpoint_replay`"),
        ("cupti_record", "`cargo xtask record --out DIR`"),
        ("rocprof_trace", "example `rocprof_trace`"),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gpu-tools"), &link).unwrap();
        let out = Command::new(&link).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            text(&out.stderr).contains(home),
            "{name}: {}",
            text(&out.stderr)
        );
        std::fs::remove_file(&link).unwrap();
    }
    // Hidden: not listed, so not offered.
    let help = text(&gpu_tools(&["--help"]).stdout);
    for sub in ["record", "replay", "rocprof"] {
        assert!(
            !help.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} listed: {help}"
        );
    }
    // Nothing written: the old commands do no work.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn metrics_takes_a_chip_name_in_any_case() {
    // The CUPTI double stands in for libcupti and libnvperf_host.so (chips GH100 and TU102).
    let double = gpu_tools_testing::double_path("cupti_profiling");
    let metrics = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .arg("metrics")
            .args(args)
            .env("GPU_TOOLS_CUPTI_LIB", &double)
            .env("GPU_TOOLS_NVPERF_HOST_LIB", &double)
            .output()
            .unwrap()
    };
    let upper = metrics(&["--chip", "GH100", "--json"]);
    assert!(upper.status.success(), "{}", text(&upper.stderr));
    assert!(!upper.stdout.is_empty());
    for chip in ["gh100", "Gh100", " gh100"] {
        let out = metrics(&["--chip", chip, "--json"]);
        assert!(out.status.success(), "{chip}: {}", text(&out.stderr));
        assert_eq!(out.stdout, upper.stdout, "{chip}: the same catalogue");
    }
    let out = metrics(&["--chip", "tu102", "--check", "dram__bytes_read.sum"]);
    assert_eq!(
        text(&out.stdout),
        "dram__bytes_read.sum: collectable by the range profiler on TU102\ntogether: 1 pass on TU102\n"
    );
    let out = metrics(&["--chip", "gx100"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("chip \"gx100\" is not known to this CUPTI; known chips: GH100, TU102"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn metrics_refuses_options_that_chips_and_check_would_ignore() {
    let double = gpu_tools_testing::double_path("cupti_profiling");
    let metrics = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .arg("metrics")
            .args(args)
            .env("GPU_TOOLS_CUPTI_LIB", &double)
            .env("GPU_TOOLS_NVPERF_HOST_LIB", &double)
            .output()
            .unwrap()
    };
    let check = ["--chip", "GH100", "--check", "dram__bytes_read.sum"];
    for args in [
        &["--chips", "--json"][..],
        &["--chips", "--method", "pm"],
        &["--chips", "--submetrics"],
        &[&check[..], &["--json"]].concat(),
        &[&check[..], &["--submetrics"]].concat(),
        &[&check[..], &["dram"]].concat(),
    ] {
        let out = metrics(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stdout)
        );
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            text(&out.stderr).contains("Usage: gpu-tools metrics"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // What they do take.
    assert!(metrics(&["--chips"]).status.success());
    assert!(
        metrics(&[&check[..], &["--method", "pm"]].concat())
            .status
            .success()
    );
}

#[test]
fn the_version_names_cupti_and_the_driver_or_says_they_are_missing() {
    let version = |cupti: &std::path::Path, driver: &std::path::Path, arg: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .args(arg)
            .env("GPU_TOOLS_CUPTI_LIB", cupti)
            .env("GPU_TOOLS_CUDA_DRIVER_LIB", driver)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let nowhere = std::path::Path::new("/nonexistent/lib.so");
    assert_eq!(
        version(nowhere, nowhere, &["--version"]),
        format!(
            "gpu-tools {} (CUPTI: not found; CUDA driver: not found)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(
        version(nowhere, nowhere, &["doctor", "--version"]),
        format!(
            "gpu-tools {} (CUPTI: not found; CUDA driver: not found)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    // The doubles answer the version calls.
    let found = version(
        &gpu_tools_testing::double_path("cupti_profiling"),
        &gpu_tools_testing::double_path("cuda_driver"),
        &["-V"],
    );
    assert!(found.starts_with("gpu-tools "), "{found}");
    assert!(!found.contains("not found"), "{found}");
    assert!(found.contains("CUDA driver: CUDA "), "{found}");
}

#[test]
fn completions_and_the_manual_page_are_generated() {
    for (shell, mark) in [
        ("bash", "complete -F _gpu__tools"),
        ("zsh", "#compdef gpu-tools"),
        ("fish", "complete -c gpu-tools"),
    ] {
        let out = gpu_tools(&["completions", shell]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains(mark), "{shell}: {script}");
        assert!(
            script.contains("trace"),
            "{shell}: the subcommands are completed"
        );
    }
    let out = gpu_tools(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    let out = gpu_tools(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie"),
        "roff: {}",
        &page[..page.len().min(200)]
    );
    assert!(page.contains(".TH gpu-tools 1"), "{page}");
    assert!(page.contains("doctor"), "the subcommands are listed");
}

/// Every help that names a log setting names the same one, and it shows the library's log.
#[test]
fn the_helps_name_one_log_setting_and_it_works() {
    let mut helps = vec![text(&gpu_tools(&["--help"]).stdout)];
    for sub in SUBCOMMANDS {
        helps.push(text(&gpu_tools(&[sub, "--help"]).stdout));
    }
    let settings: std::collections::BTreeSet<String> = helps
        .iter()
        .flat_map(|h| h.split_whitespace())
        .filter_map(|w| {
            w.find("RUST_LOG=")
                .map(|i| w[i..].trim_matches(['`', '.', ',', ':', ')']).to_string())
        })
        .collect();
    assert_eq!(
        settings.into_iter().collect::<Vec<_>>(),
        ["RUST_LOG=gpu_tools=debug"],
        "one setting in every help"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .arg("doctor")
        .env("RUST_LOG", "gpu_tools=debug")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains(" DEBUG gpu_tools::loader] "),
        "the library's log: {}",
        text(&out.stderr)
    );
}

/// Whether `shell` can be run here; where it cannot, the test says so and stops, and fails under CI, which
/// installs bash, fish and zsh.
fn have(shell: &str) -> bool {
    let found = Command::new(shell)
        .args(["-c", "exit 0"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        gpu_tools_testing::skip_unless_ci(&format!("{shell} is not installed here"));
    }
    found
}

/// The completion script of `shell`, in a file.
fn completion_script(shell: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let out = gpu_tools(&["completions", shell]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("gpu-tools.{shell}"));
    std::fs::write(&path, &out.stdout).unwrap();
    (dir, path)
}

/// What bash's completion of `gpu-tools` offers for the command line `words` (the last word is completed), as
/// bash calls the registered function: `COMP_WORDS`, `COMP_CWORD`, then `COMPREPLY`.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        r#"source "$1" || exit 9
f=$(complete -p gpu-tools | sed -E 's/.* -F ([^ ]+) .*/\1/')
[ -n "$f" ] || exit 8
COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"; COMP_POINT=${{#COMP_LINE}}
"$f" gpu-tools "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = quoted.join(" ")
    );
    let out = Command::new("bash")
        .args(["-c", &program, "bash"])
        .arg(script)
        .output()
        .unwrap();
    assert!(out.status.success(), "bash: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What fish's completion of `gpu-tools` offers for `line` (`complete -C`), the words without descriptions.
fn fish_completes(script: &std::path::Path, line: &str) -> Vec<String> {
    let out = Command::new("fish")
        .args(["--no-config", "-c", "source $argv[1]; complete -C $argv[2]"])
        .arg(script)
        .arg(line)
        .output()
        .unwrap();
    assert!(out.status.success(), "fish: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
        .collect()
}

/// Drives an interactive zsh in a pseudo-terminal (`zpty`): loads compinit and the script, has `compadd` print what
/// it is given (`HITS:` lines), types `$2` and a TAB, then clears the line and waits for a marker.
const ZSH_DRIVER: &str = r#"zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'PS1=""; PROMPT_EOL_MARK=""; autoload -U compinit; compinit -u -D'
zpty -w z "source ${1}"
zpty -w z 'compadd () { builtin compadd -O __hits "$@"; print -r -- "HITS:${(j: :)__hits}"; builtin compadd "$@" }'
zpty -w -n z "${2}"$'\t'
sleep 1
zpty -w z $'\C-a\C-k'
zpty -w z 'echo DO""NE'
zpty -r z out '*DONE*'
print -r -- "$out" | tr -d '\r' | grep -ao 'HITS:[^[:cntrl:]]*'
zpty -d z
"#;

/// What zsh's completion of `gpu-tools` offers for `line` (each candidate once), through [`ZSH_DRIVER`].
fn zsh_completes(script: &std::path::Path, line: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver.zsh");
    std::fs::write(&driver, ZSH_DRIVER).unwrap();
    let out = Command::new("timeout")
        .args(["60", "zsh", "-f"])
        .arg(&driver)
        .arg(script)
        .arg(line)
        .output()
        .unwrap();
    assert!(out.status.success(), "zsh: {}", text(&out.stderr));
    let mut words: Vec<String> = Vec::new();
    for hits in text(&out.stdout).lines() {
        // The echo of compadd's definition is not a completion.
        if hits.contains("__hits") {
            continue;
        }
        for w in hits.trim_start_matches("HITS:").split_whitespace() {
            if !words.iter().any(|x| x == w) {
                words.push(w.to_owned());
            }
        }
    }
    words
}

const MOVED: [&str; 3] = ["record", "replay", "rocprof"];

#[test]
fn bash_completes_a_subcommands_options() {
    if !have("bash") {
        return;
    }
    let (_dir, script) = completion_script("bash");
    assert_eq!(
        bash_completes(&script, &["gpu-tools", "stats", "--rep"]),
        ["--report"]
    );
    assert_eq!(
        bash_completes(&script, &["gpu-tools", "export", "--perf"]),
        ["--perfetto"]
    );
    let subcommands = bash_completes(&script, &["gpu-tools", ""]);
    for sub in SUBCOMMANDS {
        assert!(
            subcommands.iter().any(|s| s == sub),
            "{sub}: {subcommands:?}"
        );
    }
    for moved in MOVED {
        assert!(
            !subcommands.iter().any(|s| s == moved),
            "{moved}: {subcommands:?}"
        );
    }
    // A value of an option is still completed: `stats --format <TAB>`.
    let formats = bash_completes(&script, &["gpu-tools", "stats", "--format", ""]);
    assert!(formats.iter().any(|f| f == "csv"), "{formats:?}");
}

#[test]
fn fish_completes_a_subcommands_options() {
    if !have("fish") {
        return;
    }
    let (_dir, script) = completion_script("fish");
    let no_errors = Command::new("fish")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(no_errors.status.success(), "{}", text(&no_errors.stderr));
    assert_eq!(
        fish_completes(&script, "gpu-tools stats --rep"),
        ["--report"]
    );
    let subcommands = fish_completes(&script, "gpu-tools ");
    for sub in SUBCOMMANDS {
        assert!(
            subcommands.iter().any(|s| s == sub),
            "{sub}: {subcommands:?}"
        );
    }
    for moved in MOVED {
        assert!(
            !subcommands.iter().any(|s| s == moved),
            "{moved}: {subcommands:?}"
        );
    }
}

#[test]
fn zsh_completes_a_subcommands_options() {
    if !have("zsh") {
        return;
    }
    let (_dir, script) = completion_script("zsh");
    let parsed = Command::new("zsh").arg("-n").arg(&script).output().unwrap();
    assert!(parsed.status.success(), "zsh -n: {}", text(&parsed.stderr));
    assert_eq!(
        zsh_completes(&script, "gpu-tools stats --rep"),
        ["--report"]
    );
    let subcommands = zsh_completes(&script, "gpu-tools ");
    for sub in SUBCOMMANDS {
        assert!(
            subcommands.iter().any(|s| s == sub),
            "{sub}: {subcommands:?}"
        );
    }
    for moved in MOVED {
        assert!(
            !subcommands.iter().any(|s| s == moved),
            "{moved}: {subcommands:?}"
        );
    }
    let text = std::fs::read_to_string(&script).unwrap();
    let stats = text
        .split("(stats)")
        .nth(1)
        .and_then(|s| s.split(";;").next())
        .expect("an arm for stats");
    assert!(stats.contains("--report=["), "stats' --report: {stats}");
    for moved in MOVED {
        assert!(
            !text.contains(&format!("'{moved}:")),
            "{moved} is not offered"
        );
    }
}

/// The manual page: no moved-out subcommand, a SEE ALSO of pages that exist, and the exit statuses.
#[test]
fn the_manual_page_names_what_exists() {
    let out = gpu_tools(&["man"]);
    assert!(out.status.success());
    let page = text(&out.stdout);
    for moved in MOVED {
        assert!(!page.contains(&format!("tools {moved}")), "{moved}: {page}");
        assert!(
            !page.contains(&format!("tools\\-{moved}")),
            "{moved}: {page}"
        );
    }
    assert!(page.contains("\\fBgpu\\-tools stats\\fR"), "{page}");
    // No page is named that is not installed: none of gpu-tools-SUBCOMMAND(1).
    assert!(!page.contains("(1)"), "{page}");
    assert!(page.contains(".SH \"SEE ALSO\""), "{page}");
    let exit = page
        .split(".SH \"EXIT STATUS\"")
        .nth(1)
        .expect("an EXIT STATUS section");
    for code in ["0", "1", "2", "3", "126, 127", "141"] {
        assert!(exit.contains(&format!("\\fB{code}\\fR")), "{code}: {exit}");
    }
}

/// `where --help` says what the code does: several processes are examined one after the other.
#[test]
fn where_says_several_processes_are_examined_in_turn() {
    let help = text(&gpu_tools(&["where", "--help"]).stdout);
    assert!(!help.contains("at the same time"), "{help}");
    assert!(help.contains("one after the other"), "{help}");
}
