//! One module per area; the names say which part of the server they drive.

mod audit_log;
mod backend_layout;
mod catalog_compat;
mod catalog_paths;
mod check_findings;
mod cli_first_run;
mod cli_help;
mod cli_print_config;
mod docs_references;
mod examples_backends;
mod faults_backend;
mod faults_catalog;
mod faults_leak;
// Linux: some of its waits read the server's state in /proc.
#[cfg(target_os = "linux")]
mod faults_protocol;
mod load_answers;
mod protocol_calls;
mod protocol_eras;
mod protocol_framing;
mod redaction_leaks;
#[cfg(target_os = "linux")]
mod sandbox_apparmor;
#[cfg(target_os = "linux")]
mod sandbox_armed;
#[cfg(target_os = "linux")]
mod sandbox_denied;
mod sandbox_lifetime;
mod sandbox_limits;
mod sandbox_matrix;
mod sandbox_probe;
mod sandbox_python_backend;
mod sandbox_run;
mod sandbox_runs;
mod sandbox_seccomp;
#[cfg(target_os = "linux")]
mod sandbox_shapes;
mod sandbox_status;
#[cfg(target_os = "linux")]
mod secrets_masking;
mod tools_call;
// The run makes a stray file beside the database, which only Linux lets a
// draft do (the macOS profile names the database's files one by one).
#[cfg(target_os = "linux")]
mod tools_draft_sweep;
mod tools_files_return;
mod tools_guard;
mod tools_list;
mod tools_over_mcp;
mod tools_pins;
mod tools_pipeline;
