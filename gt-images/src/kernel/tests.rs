use super::*;

#[test]
fn missing_options_names_what_did_not_survive() {
    let frag = "# comment\nCONFIG_SMP=y\nCONFIG_NR_CPUS=16\nCONFIG_FOO=y\n# CONFIG_BAR is not set\n# CONFIG_BAZ is not set\n";
    let config = "CONFIG_SMP=y\nCONFIG_NR_CPUS=8\n# CONFIG_FOO is not set\nCONFIG_BAZ=y\n";
    assert_eq!(
        missing_options(frag, config),
        vec![
            "CONFIG_NR_CPUS=16 (got 8)",
            "CONFIG_FOO=y (got n)",
            "CONFIG_BAZ=n (got y)"
        ]
    );
    assert!(missing_options(frag, &format!("{config}CONFIG_FOO=y\n"))
        .iter()
        .all(|m| !m.starts_with("CONFIG_FOO")));
}

#[test]
fn an_overlay_overrides_the_fragment_before_it() {
    let frags = "CONFIG_NR_CPUS=16\nCONFIG_SMP=y\n\nCONFIG_NR_CPUS=64\n";
    assert!(missing_options(frags, "CONFIG_NR_CPUS=64\nCONFIG_SMP=y\n").is_empty());
    assert_eq!(
        missing_options(frags, "CONFIG_NR_CPUS=16\nCONFIG_SMP=y\n"),
        vec!["CONFIG_NR_CPUS=64 (got 16)"]
    );
}

#[test]
fn renames_rewrite_set_and_unset_lines_only_of_the_named_option() {
    let r: BTreeMap<String, String> = [(
        "CONFIG_PROC_SYSCTL".to_string(),
        "CONFIG_SYSCTL".to_string(),
    )]
    .into();
    let text = "# comment on CONFIG_PROC_SYSCTL\nCONFIG_PROC_SYSCTL=y\n# CONFIG_PROC_SYSCTL is not set\nCONFIG_PROC_SYSCTL_X=y\nCONFIG_SMP=y";
    assert_eq!(
        rename_options(text, &r),
        "# comment on CONFIG_PROC_SYSCTL\nCONFIG_SYSCTL=y\n# CONFIG_SYSCTL is not set\nCONFIG_PROC_SYSCTL_X=y\nCONFIG_SMP=y"
    );
    // The check then asks for the new name: a dropped CONFIG_SYSCTL is reported as such.
    let frag = rename_options("CONFIG_PROC_SYSCTL=y\n", &r);
    assert_eq!(
        missing_options(&frag, "# CONFIG_SYSCTL is not set\n"),
        vec!["CONFIG_SYSCTL=y (got n)"]
    );
    assert_eq!(rename_options(text, &BTreeMap::new()), text);
}

#[test]
fn cache_key_changes_with_every_input() {
    let base = vec!["source=a".to_string(), "fragment=f sha256=1".to_string()];
    let mut other = base.clone();
    other.push("patch=p sha256=2".into());
    assert_ne!(key_of(&base), key_of(&other));
    assert_eq!(key_of(&base), key_of(&base.clone()));
}
