//! Host facts the launcher needs (paths are in [`crate::paths`], provenance helpers in
//! `results`).

/// `uname -r` of the host.
pub fn host_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_facts_are_read() {
        assert!(!host_release().is_empty());
        assert!(unix_now() > 1.0e9);
    }
}
