use super::*;

#[test]
fn key_names_are_unique_in_each_section() {
    for section in [&TOP_LEVEL[..], &DEFAULTS[..], &UNIT[..], &PARAM[..]] {
        let mut names: Vec<&str> = section.iter().map(|key| key.name).collect();
        names.sort_unstable();
        let n_names = names.len();
        names.dedup();
        assert_eq!(names.len(), n_names);
    }
}

#[test]
fn unit_settings_include_every_default() {
    for default in &DEFAULTS {
        assert!(
            UNIT.iter().any(|key| key.name == default.name),
            "{}",
            default.name
        );
    }
}
