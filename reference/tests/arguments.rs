//! The command line: flags as one `--name=value` element, positionals after
//! `--`, values taken literally, and every mistake answered with exit 2 and
//! the error document.

mod common;

use common::Workspace;

#[test]
fn flags_are_one_element_and_positionals_follow_the_separator() {
    let ws = Workspace::new();
    let with_sep = ws.run(&[
        "campaign-check",
        "--days=30",
        "--format=json",
        "--",
        "campaigns/spring-launch.yaml",
    ]);
    let without = ws.run(&[
        "campaign-check",
        "campaigns/spring-launch.yaml",
        "--days=30",
        "--format=json",
    ]);
    assert_eq!(with_sep.code, 0, "{with_sep:?}");
    assert_eq!(with_sep.stdout, without.stdout);
    assert_eq!(with_sep.json()["window"]["days"], 30);
    assert_eq!(with_sep.json()["posts_checked"], 5);
}

#[test]
fn a_flag_value_in_the_next_element_is_refused() {
    let ws = Workspace::new();
    let run = ws.run(&[
        "campaign-check",
        "--days",
        "30",
        "--format=json",
        "--",
        "campaigns/spring-launch.yaml",
    ]);
    assert_eq!(run.error_code(), "bad_argument");
}

#[test]
fn values_are_taken_literally() {
    let ws = Workspace::new();
    let run = ws.run(&["context", "--note=--db=/elsewhere", "--format=json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["note"], "--db=/elsewhere");
    assert_eq!(
        doc["database"]["path"],
        ws.path("data/reachweaver.db").as_str()
    );
    assert_eq!(doc["database"]["present"], true);
    let run = ws.run(&["settings", "--note=a=b -- c", "--format=json"]);
    assert_eq!(run.json()["note"], "a=b -- c");
}

#[test]
fn a_positional_starting_with_a_dash_goes_after_the_separator() {
    let ws = Workspace::new();
    std::fs::write(
        ws.home.join("-odd.log"),
        "x ERROR the text of this file\nx INFO fine\n",
    )
    .unwrap();
    let run = ws.run(&["log-summary", "--format=json", "--", "-odd.log"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.json()["errors"][0]["text"],
        "x ERROR the text of this file"
    );
    let run = ws.run(&["log-summary", "--format=json", "-odd.log"]);
    assert_eq!(run.error_code(), "bad_argument");
    // After --, even something shaped like a flag is a positional.
    let run = ws.run(&["error-explain", "--format=json", "--", "--db=/elsewhere"]);
    assert_eq!(run.error_code(), "not_found");
    assert!(run.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--db=/elsewhere"));
}

#[test]
fn repeatable_flags_are_given_once_per_value() {
    let ws = Workspace::new();
    let run = ws.run(&[
        "length-check",
        "--channel=x",
        "--channel=bluesky",
        "--format=json",
        "--",
        "drafts/webinar-reminder.txt",
    ]);
    assert_eq!(run.code, 1);
    let doc = run.json();
    let channels: Vec<&str> = doc["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, vec!["x", "bluesky"]);
}

#[test]
fn bad_arguments_give_exit_2_and_the_error_document() {
    let ws = Workspace::new();
    let spring = "campaigns/spring-launch.yaml";
    let cases: &[(&[&str], &str)] = &[
        (
            &["campaign-check", "--nope=1", "--format=json", "--", spring],
            "bad_argument",
        ),
        (
            &["campaign-check", "--days=0", "--format=json", "--", spring],
            "bad_argument",
        ),
        (
            &[
                "campaign-check",
                "--days=366",
                "--format=json",
                "--",
                spring,
            ],
            "bad_argument",
        ),
        (
            &[
                "campaign-check",
                "--days=1.5",
                "--format=json",
                "--",
                spring,
            ],
            "bad_argument",
        ),
        (
            &["campaign-check", "--days=", "--format=json", "--", spring],
            "bad_argument",
        ),
        (
            &[
                "campaign-check",
                "--days=1",
                "--days=2",
                "--format=json",
                "--",
                spring,
            ],
            "bad_argument",
        ),
        (
            &[
                "campaign-check",
                "--strict=true",
                "--format=json",
                "--",
                spring,
            ],
            "bad_argument",
        ),
        (
            &[
                "campaign-check",
                "--channel=threads",
                "--format=json",
                "--",
                spring,
            ],
            "bad_argument",
        ),
        (&["campaign-check", "--format=json"], "bad_argument"),
        (
            &["campaign-check", "--format=json", "--", spring, "extra"],
            "bad_argument",
        ),
        (
            &[
                "repeat-check",
                "--threshold=2.5e-1",
                "--format=json",
                "--",
                "drafts/launch-x.txt",
            ],
            "bad_argument",
        ),
        (
            &[
                "repeat-check",
                "--threshold=1.5",
                "--format=json",
                "--",
                "drafts/launch-x.txt",
            ],
            "bad_argument",
        ),
        (
            &["ops-summary", "--since=last week", "--format=json"],
            "bad_argument",
        ),
        (
            &[
                "template-render",
                "--var=novalue",
                "--format=json",
                "--",
                "templates/launch.txt",
            ],
            "bad_argument",
        ),
        (
            &["context", "--db=/elsewhere", "--format=json"],
            "bad_argument",
        ),
        (&["context", "-x", "--format=json"], "bad_argument"),
        (&["no-such-command", "--format=json"], "unknown_command"),
        (
            &[
                "claims-check",
                "--format=json",
                "--",
                "drafts/does-not-exist.txt",
            ],
            "file_not_found",
        ),
        (&["trace", "--format=json", "--", "d-4242"], "not_found"),
    ];
    for (args, code) in cases {
        let run = ws.run(args);
        assert_eq!(&run.error_code(), code, "{args:?}: {run:?}");
        assert!(
            run.stderr.starts_with("reachweaver: "),
            "{args:?}: a human line on stderr"
        );
    }
}

#[test]
fn a_number_in_plain_decimal_is_accepted() {
    let ws = Workspace::new();
    let run = ws.run(&[
        "repeat-check",
        "--threshold=0.25",
        "--format=json",
        "--",
        "drafts/launch-x.txt",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["threshold"], 0.25);
}

#[test]
fn errors_without_json_go_to_stderr_only() {
    let ws = Workspace::new();
    let run = ws.run(&[
        "campaign-check",
        "--days=0",
        "--",
        "campaigns/spring-launch.yaml",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("--days"), "{run:?}");
    let run = ws.run(&[
        "campaign-check",
        "--format=yaml",
        "--",
        "campaigns/spring-launch.yaml",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("--format"), "{run:?}");
}

#[test]
fn no_command_is_an_error() {
    let ws = Workspace::new();
    let run = ws.run(&["--format=json"]);
    assert_eq!(run.error_code(), "bad_argument");
    let run = ws.run_raw(&[], &ws.home, &[]);
    assert_eq!(run.code, 2);
}

#[test]
fn globals_come_first_and_set_the_paths() {
    let ws = Workspace::new();
    let moved = ws.home.join("elsewhere.db");
    std::fs::copy(ws.db(), &moved).unwrap();
    let home = format!("--home={}", ws.home.display());
    let db = format!("--db={}", moved.display());
    let accounts = format!("--accounts={}", ws.path("accounts.yaml"));
    let profile = format!("--profile={}", ws.path("profile.yaml"));
    let run = ws.run_raw(
        &[&home, &db, &accounts, &profile, "describe", "--format=json"],
        &ws.home,
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["paths"]["db"], moved.to_string_lossy().as_ref());
    std::fs::remove_file(ws.db()).unwrap();
    let run = ws.run_raw(&[&home, &db, "ops-summary", "--format=json"], &ws.home, &[]);
    assert_eq!(run.code, 0, "the moved database is used: {run:?}");
    let run = ws.run_raw(
        &["--home", "/tmp", "version", "--format=json"],
        &ws.home,
        &[],
    );
    assert_eq!(run.error_code(), "bad_argument");
}

#[test]
fn home_defaults_to_the_environment_then_the_working_folder() {
    let ws = Workspace::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let home = ws.home.to_string_lossy().into_owned();
    let run = ws.run_raw(
        &["describe", "--format=json"],
        elsewhere.path(),
        &[("REACHWEAVER_HOME", &home)],
    );
    assert_eq!(run.json()["paths"]["home"], home.as_str());
    let run = ws.run_raw(&["describe", "--format=json"], &ws.home, &[]);
    assert_eq!(run.json()["paths"]["home"], home.as_str());
    assert_eq!(
        run.json()["paths"]["db"],
        ws.path("data/reachweaver.db").as_str()
    );
    // A relative --home is made absolute against the working folder.
    let parent = ws.home.parent().unwrap();
    let run = ws.run_raw(
        &["--home=workspace", "describe", "--format=json"],
        parent,
        &[],
    );
    assert_eq!(run.json()["paths"]["home"], home.as_str());
}
