//! Include and exclude patterns for device names, mount points and
//! filesystem types, as node_exporter's `device-include`/`-exclude` flags
//! take them: a name is published if it matches the include pattern (when
//! one is given) and not the exclude pattern. A pattern matches anywhere
//! in the name unless anchored (`^…$`); an empty pattern is none. The
//! `regex` crate runs in time linear in the name, whatever the pattern.

use regex::Regex;

/// node_exporter's default `--collector.diskstats.device-exclude`:
/// partitions, RAM disks, zram, loop and floppy devices.
pub const DISKS_EXCLUDE: &str = r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$";

/// node_exporter's default `--collector.filesystem.mount-points-exclude`.
pub const MOUNT_POINTS_EXCLUDE: &str =
    "^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)";

/// node_exporter's default `--collector.filesystem.fs-types-exclude`.
pub const FS_TYPES_EXCLUDE: &str = "^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|erofs|sysfs|tracefs)$";

/// The most bytes of a compiled pattern (the `regex` crate's size
/// limit): a pattern too large is refused, never compiled at any cost.
const SIZE_LIMIT: usize = 1 << 20;

/// An include and an exclude pattern; the default lets everything pass.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    include: Option<Regex>,
    exclude: Option<Regex>,
}

fn compile(flag: &str, pattern: &str) -> Result<Option<Regex>, String> {
    if pattern.is_empty() {
        return Ok(None);
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .build()
        .map(Some)
        .map_err(|e| {
            // The regex crate's message is several lines; the first says it.
            let first = e.to_string();
            let first = first.lines().last().unwrap_or_default().trim().to_string();
            format!("{flag} {pattern:?}: not a regular expression ({first})")
        })
}

impl Filter {
    /// From the flags `include` and `exclude` (named `flag_in` and
    /// `flag_ex` in errors): at most one of them may be given; with
    /// neither, `default_exclude` excludes.
    pub fn new(
        (flag_in, include): (&str, Option<&str>),
        (flag_ex, exclude): (&str, Option<&str>),
        default_exclude: &str,
    ) -> Result<Self, String> {
        match (include, exclude) {
            (Some(_), Some(_)) => Err(format!(
                "{flag_in} and {flag_ex} cannot be given together: give one"
            )),
            (Some(i), None) => Ok(Self {
                include: compile(flag_in, i)?,
                exclude: None,
            }),
            (None, e) => Ok(Self {
                include: None,
                exclude: compile(flag_ex, e.unwrap_or(default_exclude))?,
            }),
        }
    }

    /// An exclude pattern only (`flag` in errors).
    pub fn exclude(flag: &str, pattern: &str) -> Result<Self, String> {
        Ok(Self {
            include: None,
            exclude: compile(flag, pattern)?,
        })
    }

    /// Whether `name` passes.
    pub fn allows(&self, name: &str) -> bool {
        self.include.as_ref().is_none_or(|r| r.is_match(name))
            && !self.exclude.as_ref().is_some_and(|r| r.is_match(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disks(i: Option<&str>, e: Option<&str>) -> Result<Filter, String> {
        Filter::new(("--in", i), ("--ex", e), DISKS_EXCLUDE)
    }

    #[test]
    fn node_exporters_default_disk_exclude() {
        let f = disks(None, None).unwrap();
        for name in ["sda", "vda", "nvme0n1", "dm-0", "md0", "mmcblk0", "sr0"] {
            assert!(f.allows(name), "{name}");
        }
        for name in [
            "sda1",
            "vdb2",
            "xvda1",
            "nvme0n1p1",
            "loop0",
            "ram1",
            "zram0",
            "fd0",
        ] {
            assert!(!f.allows(name), "{name}");
        }
    }

    #[test]
    fn include_replaces_the_default_exclude_and_empty_is_none() {
        let f = disks(Some("^loop"), None).unwrap();
        assert!(f.allows("loop0") && !f.allows("sda"));
        let f = disks(None, Some("")).unwrap();
        assert!(f.allows("loop0") && f.allows("sda1"));
        let f = disks(None, Some("^sd")).unwrap();
        assert!(!f.allows("sda") && f.allows("loop0"));
    }

    #[test]
    fn both_or_a_bad_pattern_are_refused_with_the_flag_named() {
        let e = disks(Some("a"), Some("b")).unwrap_err();
        assert!(e.contains("--in and --ex"), "{e}");
        let e = disks(None, Some("(")).unwrap_err();
        assert!(e.starts_with("--ex \"(\": not a regular expression"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let huge = "a{1000}{1000}";
        assert!(disks(Some(huge), None).is_err());
    }
}
