//! Where the machine's CPU goes during a scenario: each process of the system under test (its
//! hashing lanes apart), the servers beside it, the load generator and the rest of the machine,
//! as CPU time per request. A ratio that misses its target is then read off the same run: with
//! every core busy, sign-ins ÷ raw argon2id is the lanes' share of the machine during the flood
//! over their share during the raw run, times a raw hash's CPU over a sign-in's; and `/users/me`
//! ÷ bare handler is the bare request's CPU over this one's.

use std::time::Instant;

/// Clock ticks per second of `/proc`'s CPU times: Linux reports them in `USER_HZ`, which is
/// 100 on every architecture it ships for (it is fixed by the ABI, unlike the kernel's `HZ`).
const TICKS_PER_SECOND: f64 = 100.0;

/// The parts beside the system under test, as the report names them.
const SURROUNDINGS: [&str; 4] = ["PostgreSQL", "Redis", "RabbitMQ", "load generator"];

/// The suffix of a process's lanes part.
const LANES: &str = "hashing lanes";

/// A part of the machine whose CPU time is counted.
#[derive(Debug, Clone)]
enum Part {
    /// The threads of `pid` whose name starts with `password-` (`lanes`) or all the others.
    Process { pid: u32, lanes: bool },
    /// Every process whose `comm` is one of these.
    Named(&'static [&'static str]),
    /// The benchmark's own process: the load generator.
    LoadGenerator,
}

/// The parts a reading counts, named as the report prints them.
pub struct Meter {
    parts: Vec<(String, Part)>,
}

/// Cumulative CPU ticks of each part, and of the whole machine (busy and idle), at one instant.
pub struct Reading {
    at: Instant,
    ticks: Vec<u64>,
    machine_busy: u64,
    machine_idle: u64,
}

/// CPU time per request (µs) of each part over a scenario.
#[derive(Debug, Clone, Default)]
pub struct PerRequest {
    pub parts: Vec<(String, f64)>,
    /// Busy time of the machine no counted part accounts for (other processes, the kernel's
    /// own threads, interrupts).
    pub rest: f64,
    /// The machine's busy time per request.
    busy: f64,
    /// The cores' idle time per request.
    pub idle: f64,
}

impl PerRequest {
    pub fn busy(&self) -> f64 {
        self.busy
    }

    /// CPU per request of the part named `name`.
    pub fn of(&self, name: &str) -> f64 {
        self.sum(|n| n == name)
    }

    /// CPU per request of the hashing lanes.
    pub fn lanes(&self) -> f64 {
        self.sum(is_lanes)
    }

    /// The machine's whole time per request, busy and idle: with every core in use, rates are
    /// inverse to it.
    pub fn whole(&self) -> f64 {
        self.busy + self.idle
    }

    /// The hashing lanes' share of all the machine's time, busy and idle.
    pub fn lanes_share(&self) -> f64 {
        self.lanes() / self.whole().max(f64::EPSILON)
    }

    /// The system's own processes without their lanes: (name, µs) each.
    pub fn system(&self) -> Vec<(&str, f64)> {
        self.parts
            .iter()
            .filter(|(n, _)| !is_lanes(n) && !SURROUNDINGS.contains(&n.as_str()))
            .map(|(n, us)| (n.as_str(), *us))
            .collect()
    }

    fn sum(&self, pick: impl Fn(&str) -> bool) -> f64 {
        // Folded from +0.0: an empty `sum()` of floats is -0.0, which prints as "-0".
        self.parts
            .iter()
            .filter(|(n, _)| pick(n))
            .fold(0.0, |total, (_, us)| total + us)
    }
}

impl Meter {
    /// Counts `processes` (name, pid) of the system under test, each split into hashing lanes
    /// and the rest, beside the servers and the load generator.
    pub fn new(processes: &[(String, u32)]) -> Self {
        let mut parts = Vec::new();
        for (name, pid) in processes {
            parts.push((
                format!("{name}: {LANES}"),
                Part::Process {
                    pid: *pid,
                    lanes: true,
                },
            ));
            parts.push((
                name.clone(),
                Part::Process {
                    pid: *pid,
                    lanes: false,
                },
            ));
        }
        let [postgres, redis, rabbitmq, generator] = SURROUNDINGS.map(String::from);
        parts.push((postgres, Part::Named(&["postgres"])));
        parts.push((redis, Part::Named(&["redis-server"])));
        parts.push((
            rabbitmq,
            Part::Named(&["beam.smp", "epmd", "erl_child_setup", "inet_gethost"]),
        ));
        parts.push((generator, Part::LoadGenerator));
        Self { parts }
    }

    pub fn read(&self) -> Reading {
        let (machine_busy, machine_idle) = machine_ticks();
        Reading {
            at: Instant::now(),
            ticks: self.parts.iter().map(|(_, p)| part_ticks(p)).collect(),
            machine_busy,
            machine_idle,
        }
    }

    /// CPU per request between two readings around a scenario that ran at `per_second`.
    pub fn per_request(&self, from: &Reading, to: &Reading, per_second: f64) -> PerRequest {
        let requests = per_second * to.at.duration_since(from.at).as_secs_f64();
        let micros = |ticks: u64| ticks as f64 / TICKS_PER_SECOND * 1e6 / requests.max(1.0);
        let deltas: Vec<u64> = from
            .ticks
            .iter()
            .zip(&to.ticks)
            .map(|(a, b)| b.saturating_sub(*a))
            .collect();
        let counted: u64 = deltas.iter().sum();
        let busy = to.machine_busy.saturating_sub(from.machine_busy);
        PerRequest {
            parts: self
                .parts
                .iter()
                .zip(&deltas)
                // A process without lanes has no lanes part worth a column.
                .filter(|((name, _), d)| **d > 0 || !is_lanes(name))
                .map(|((name, _), d)| (name.clone(), micros(*d)))
                .collect(),
            rest: micros(busy.saturating_sub(counted)),
            busy: micros(busy),
            idle: micros(to.machine_idle.saturating_sub(from.machine_idle)),
        }
    }
}

fn is_lanes(name: &str) -> bool {
    name.ends_with(LANES)
}

fn part_ticks(part: &Part) -> u64 {
    match part {
        Part::Process { pid, lanes } => threads(*pid)
            .filter(|(comm, _)| comm.starts_with("password-") == *lanes)
            .map(|(_, ticks)| ticks)
            .sum(),
        Part::Named(names) => processes()
            .filter(|(comm, _)| names.contains(&comm.as_str()))
            .map(|(_, ticks)| ticks)
            .sum(),
        // The process's own line: it keeps the times of the generator's threads after they end.
        Part::LoadGenerator => stat("/proc/self/stat").map_or(0, |(_, t)| t),
    }
}

/// `(comm, utime + stime)` of a `/proc/.../stat` line.
fn stat(path: &str) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    // The name may hold spaces and parentheses; it ends at the last `)`.
    let (head, tail) = text.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_owned();
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the name: state is field 3 of the line, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// Every thread of `pid` (a gone process has none).
fn threads(pid: u32) -> impl Iterator<Item = (String, u64)> {
    entries(&format!("/proc/{pid}/task"))
        .filter_map(move |tid| stat(&format!("/proc/{pid}/task/{tid}/stat")))
}

/// Every process (its threads' times included, exited children's not).
fn processes() -> impl Iterator<Item = (String, u64)> {
    entries("/proc").filter_map(|pid| stat(&format!("/proc/{pid}/stat")))
}

/// The numeric entries of a `/proc` directory.
fn entries(dir: &str) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
}

/// The machine's busy and idle ticks, all cores (`/proc/stat`'s first line).
fn machine_ticks() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal; guest time is inside user already, and
    // steal (the hypervisor running someone else) is neither this machine's work nor idle.
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    let idle = at(3) + at(4);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    (busy, idle)
}
