use super::*;

#[test]
fn the_submission_folder_is_beside_the_runs_units() {
    assert_eq!(
        submissions_dir(Path::new("/s/.apollo/runs/r1/units/load__eu/2")),
        Path::new("/s/.apollo/runs/r1/slurm")
    );
    assert_eq!(
        submissions_dir(Path::new("/elsewhere/a/1")),
        Path::new("/elsewhere/a/1/slurm")
    );
}

#[test]
fn an_attempts_array_file_names_its_array_and_task() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(array_task_of(dir.path()), None);
    std::fs::write(
        dir.path().join(ARRAY),
        "7 apollo:r1:@array:9:0123456789abcdef\n",
    )
    .unwrap();
    assert_eq!(
        array_task_of(dir.path()),
        Some(JobRef {
            name: "apollo:r1:@array:9:0123456789abcdef".into(),
            task: Some(7)
        })
    );
    std::fs::write(dir.path().join(ARRAY), "x apollo:r1:@array:9:ab\n").unwrap();
    assert_eq!(array_task_of(dir.path()), None);
}

#[test]
fn the_array_script_runs_its_tasks_attempt_wrapper_with_its_output() {
    let script = array_script("r1", Path::new("/s/runs/r1/slurm/ab"), 3);
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains("index='/s/runs/r1/slurm/ab/index'\n"),
        "{script}"
    );
    assert!(
        script.contains(
            r#"exec /bin/sh "$dir/slurm.sh" </dev/null >>"$dir/stdout" 2>>"$dir/stderr""#
        ),
        "{script}"
    );
}
