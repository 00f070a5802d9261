//! The consumer group's partition assignors (Kafka's `RangeAssignor`, `RoundRobinAssignor`,
//! `StickyAssignor` and `CooperativeStickyAssignor`): which member of a group reads which
//! partition.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};

/// A topic's partition.
pub type TopicPartition = (String, i32);

/// One member of a group as the assignor sees it: its id, the topics it subscribes to, and the
/// partitions it owned before this rebalance (used by the sticky assignor only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    pub topics: Vec<String>,
    pub owned: Vec<TopicPartition>,
}

/// Kafka's `partition.assignment.strategy` names (the classes' `name()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentStrategy {
    Range,
    RoundRobin,
    /// Kafka's eager `StickyAssignor`: the same assignment as the cooperative one (both are
    /// Kafka's `AbstractStickyAssignor`); only the protocol's name differs here, since a group
    /// over files never revokes more than what moves (`membership.rs`).
    Sticky,
    CooperativeSticky,
}

impl AssignmentStrategy {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "range" => Ok(AssignmentStrategy::Range),
            "roundrobin" | "round_robin" => Ok(AssignmentStrategy::RoundRobin),
            "sticky" => Ok(AssignmentStrategy::Sticky),
            "cooperative-sticky" | "cooperative_sticky" => {
                Ok(AssignmentStrategy::CooperativeSticky)
            }
            other => Err(Error::InvalidArgument(format!(
                "assignment strategy '{other}' (range, roundrobin, sticky or cooperative-sticky)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::RoundRobin => "roundrobin",
            AssignmentStrategy::Sticky => "sticky",
            AssignmentStrategy::CooperativeSticky => "cooperative-sticky",
        }
    }
}

/// Member id -> its partitions, every member present (an empty list when it gets nothing).
pub type Assignment = BTreeMap<String, Vec<TopicPartition>>;

/// Assigns the partitions of the subscribed topics (`partitions_per_topic`: topic -> count;
/// a subscribed topic missing from it has no partitions, as Kafka skips unknown topics).
pub fn assign(
    strategy: AssignmentStrategy,
    members: &[MemberSubscription],
    partitions_per_topic: &BTreeMap<String, i32>,
) -> Result<Assignment> {
    let mut seen = BTreeSet::new();
    for m in members {
        if m.member_id.is_empty() {
            return Err(Error::InvalidArgument("a member id cannot be empty".into()));
        }
        if !seen.insert(m.member_id.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "member '{}' is listed twice",
                m.member_id
            )));
        }
    }
    Ok(match strategy {
        AssignmentStrategy::Range => range(members, partitions_per_topic),
        AssignmentStrategy::RoundRobin => round_robin(members, partitions_per_topic),
        AssignmentStrategy::Sticky | AssignmentStrategy::CooperativeSticky => {
            sticky(members, partitions_per_topic)
        }
    })
}

fn empty_assignment(members: &[MemberSubscription]) -> Assignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

/// Kafka's `RangeAssignor` (no racks): per topic, its subscribers sorted by member id take
/// consecutive ranges; the first `partitions % subscribers` take one more.
fn range(members: &[MemberSubscription], counts: &BTreeMap<String, i32>) -> Assignment {
    let mut out = empty_assignment(members);
    let mut by_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in members {
        for t in &m.topics {
            by_topic.entry(t).or_default().push(&m.member_id);
        }
    }
    for (topic, mut subscribers) in by_topic {
        let Some(&n) = counts.get(topic) else {
            continue;
        };
        subscribers.sort_unstable();
        subscribers.dedup();
        let c = subscribers.len() as i32;
        let (per, extra) = (n / c, n % c);
        for (i, member) in subscribers.into_iter().enumerate() {
            let i = i as i32;
            let start = per * i + i.min(extra);
            let len = per + i32::from(i < extra);
            let list = out.get_mut(member).expect("every member has an entry");
            list.extend((start..start + len).map(|p| (topic.to_string(), p)));
        }
    }
    out
}

/// Kafka's `RoundRobinAssignor`: every subscribed partition, topics in name order, goes to the
/// next member (sorted by id, in a circle) that subscribes to its topic.
fn round_robin(members: &[MemberSubscription], counts: &BTreeMap<String, i32>) -> Assignment {
    let mut out = empty_assignment(members);
    let mut sorted: Vec<(&str, BTreeSet<&str>)> = members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.topics.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let topics: BTreeSet<&str> = sorted.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    let mut next = 0usize;
    for topic in topics {
        let Some(&n) = counts.get(topic) else {
            continue;
        };
        for p in 0..n {
            // Someone subscribes to this topic, so the walk ends within one circle.
            while !sorted[next % sorted.len()].1.contains(topic) {
                next += 1;
            }
            let member = sorted[next % sorted.len()].0;
            next += 1;
            out.get_mut(member)
                .expect("every member has an entry")
                .push((topic.to_string(), p));
        }
    }
    out
}

/// The sticky assignment `StickyAssignor` gives and `CooperativeStickyAssignor` converges to: every subscribed partition
/// assigned, counts as even as subscriptions allow (within one when everyone subscribes to the
/// same topics), and each member keeps as many of the partitions it owned as balance permits.
/// The cooperative part (a moved partition is released by its old owner before the new owner
/// takes it) is the group protocol's job (`membership.rs`), not the assignor's.
fn sticky(members: &[MemberSubscription], counts: &BTreeMap<String, i32>) -> Assignment {
    let mut out = empty_assignment(members);
    if members.is_empty() {
        return out;
    }
    let subs: BTreeMap<&str, BTreeSet<&str>> = members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.topics.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let all: BTreeSet<TopicPartition> = subs
        .values()
        .flatten()
        .filter_map(|t| counts.get(*t).map(|&n| (t.to_string(), n)))
        .flat_map(|(t, n)| (0..n).map(move |p| (t.clone(), p)))
        .collect();
    let mut sorted_members: Vec<&MemberSubscription> = members.iter().collect();
    sorted_members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    // Even share: with equal subscriptions nobody keeps more than ceil(P / C).
    let max_quota = all.len().div_ceil(members.len());
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in &sorted_members {
        let list = out.get_mut(&m.member_id).expect("entry");
        for tp in &m.owned {
            if list.len() >= max_quota {
                break;
            }
            if all.contains(tp)
                && subs[m.member_id.as_str()].contains(tp.0.as_str())
                && taken.insert(tp.clone())
            {
                list.push(tp.clone());
            }
        }
    }
    // The rest, one at a time, to the least-loaded subscriber (ties by member id).
    for tp in &all {
        if taken.contains(tp) {
            continue;
        }
        let best = sorted_members
            .iter()
            .filter(|m| subs[m.member_id.as_str()].contains(tp.0.as_str()))
            .min_by_key(|m| out[&m.member_id].len())
            .expect("a subscribed partition has a subscriber");
        out.get_mut(&best.member_id)
            .expect("entry")
            .push(tp.clone());
        taken.insert(tp.clone());
    }
    // With different subscriptions the kept partitions may still be uneven: move partitions
    // from the most to a less loaded member that can take them until no move helps.
    loop {
        let mut moved = false;
        let mut order: Vec<String> = out.keys().cloned().collect();
        order.sort_by_key(|m| std::cmp::Reverse(out[m].len()));
        'outer: for from in &order {
            let from = from.as_str();
            let from_len = out[from].len();
            for i in (0..from_len).rev() {
                let tp = out[from][i].clone();
                let target = sorted_members
                    .iter()
                    .map(|m| m.member_id.as_str())
                    .filter(|m| *m != from && subs[*m].contains(tp.0.as_str()))
                    .min_by_key(|m| out[*m].len());
                if let Some(to) = target {
                    if out[to].len() + 1 < from_len {
                        let to = to.to_string();
                        out.get_mut(from).expect("entry").remove(i);
                        out.get_mut(&to).expect("entry").push(tp);
                        moved = true;
                        break 'outer;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned: vec![],
        }
    }

    fn tps(topic: &str, ps: &[i32]) -> Vec<TopicPartition> {
        ps.iter().map(|&p| (topic.to_string(), p)).collect()
    }

    #[test]
    fn range_gives_the_first_members_one_more() {
        // RangeAssignor's javadoc example: two consumers, t0 and t1 with 3 partitions each.
        let counts = BTreeMap::from([("t0".to_string(), 3), ("t1".to_string(), 3)]);
        let members = [member("C1", &["t0", "t1"]), member("C0", &["t0", "t1"])];
        let a = assign(AssignmentStrategy::Range, &members, &counts).unwrap();
        let mut c0 = tps("t0", &[0, 1]);
        c0.extend(tps("t1", &[0, 1]));
        let mut c1 = tps("t0", &[2]);
        c1.extend(tps("t1", &[2]));
        assert_eq!(a["C0"], c0);
        assert_eq!(a["C1"], c1);
    }

    #[test]
    fn round_robin_skips_members_not_subscribed() {
        // RoundRobinAssignor's javadoc example: C0 {t0}, C1 {t0, t1}, C2 {t0, t1, t2}; t0 has 1
        // partition, t1 2, t2 3.
        let counts = BTreeMap::from([
            ("t0".to_string(), 1),
            ("t1".to_string(), 2),
            ("t2".to_string(), 3),
        ]);
        let members = [
            member("C0", &["t0"]),
            member("C1", &["t0", "t1"]),
            member("C2", &["t0", "t1", "t2"]),
        ];
        let a = assign(AssignmentStrategy::RoundRobin, &members, &counts).unwrap();
        assert_eq!(a["C0"], tps("t0", &[0]));
        assert_eq!(a["C1"], tps("t1", &[0]));
        let mut c2 = tps("t1", &[1]);
        c2.extend(tps("t2", &[0, 1, 2]));
        assert_eq!(a["C2"], c2);
    }

    #[test]
    fn sticky_keeps_what_it_can_and_balances() {
        let counts = BTreeMap::from([("t".to_string(), 6)]);
        let first = assign(
            AssignmentStrategy::CooperativeSticky,
            &[member("a", &["t"]), member("b", &["t"])],
            &counts,
        )
        .unwrap();
        assert_eq!(first["a"].len(), 3);
        let mut a = member("a", &["t"]);
        a.owned = first["a"].clone();
        let mut b = member("b", &["t"]);
        b.owned = first["b"].clone();
        let second = assign(
            AssignmentStrategy::CooperativeSticky,
            &[a, b, member("c", &["t"])],
            &counts,
        )
        .unwrap();
        for m in ["a", "b", "c"] {
            assert_eq!(second[m].len(), 2, "{m}: {second:?}");
        }
        for m in ["a", "b"] {
            assert!(
                second[m].iter().all(|tp| first[m].contains(tp)),
                "{m} kept its own"
            );
        }
    }

    #[test]
    fn duplicate_or_empty_members_are_refused() {
        let counts = BTreeMap::new();
        assert!(assign(
            AssignmentStrategy::Range,
            &[member("a", &[]), member("a", &[])],
            &counts
        )
        .is_err());
        assert!(assign(AssignmentStrategy::Range, &[member("", &[])], &counts).is_err());
        assert!(AssignmentStrategy::from_name("nope").is_err());
    }

    #[test]
    fn sticky_and_cooperative_sticky_are_two_protocols_with_one_assignment() {
        let eager = AssignmentStrategy::from_name("sticky").unwrap();
        let cooperative = AssignmentStrategy::from_name("cooperative_sticky").unwrap();
        assert_eq!(
            (eager.name(), cooperative.name()),
            ("sticky", "cooperative-sticky")
        );
        let counts = BTreeMap::from([("t".to_string(), 7)]);
        let mut a = member("a", &["t"]);
        a.owned = tps("t", &[0, 1, 2, 3, 4, 5, 6]);
        let members = [a, member("b", &["t"])];
        assert_eq!(
            assign(eager, &members, &counts).unwrap(),
            assign(cooperative, &members, &counts).unwrap()
        );
    }
}
