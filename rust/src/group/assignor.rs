//! The consumer group's partition assignors (Kafka's `RangeAssignor`, `RoundRobinAssignor`,
//! `StickyAssignor` and `CooperativeStickyAssignor`): which member of a group reads which
//! partition.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

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
    /// Kafka's `AbstractStickyAssignor`); a group over files never revokes more than what
    /// moves (`membership.rs`).
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
    if let Some((topic, count)) = partitions_per_topic.iter().find(|(_, n)| **n < 0) {
        return Err(Error::InvalidArgument(format!(
            "topic '{topic}' cannot have {count} partitions"
        )));
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
        subscribers.sort_unstable_by(|a, b| java_string_cmp(a, b));
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
    sorted.sort_unstable_by(|a, b| java_string_cmp(a.0, b.0));
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
/// When every member subscribes to the same topics (the usual group) it is Kafka's own choice
/// ([`constrained_sticky`]); otherwise an assignment with the same guarantees. The cooperative
/// part (a moved partition is released by its old owner before the new owner takes it) is the
/// group protocol's job (`membership.rs`), or [`without_transfers`] for one rebalance's answer.
fn sticky(members: &[MemberSubscription], counts: &BTreeMap<String, i32>) -> Assignment {
    let mut out = empty_assignment(members);
    if members.is_empty() {
        return out;
    }
    let first: BTreeSet<&str> = members[0].topics.iter().map(String::as_str).collect();
    if members
        .iter()
        .all(|m| m.topics.iter().map(String::as_str).collect::<BTreeSet<_>>() == first)
    {
        return constrained_sticky(members, counts, &first);
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
    sorted_members.sort_by(|a, b| java_string_cmp(&a.member_id, &b.member_id));
    // Even share: with equal subscriptions nobody keeps more than ceil(P / C).
    let max_quota = all.len().div_ceil(members.len());
    // A partition two members claim is kept by neither, as Kafka's `allSubscriptionsEqual`
    // settles it for members of one generation.
    let contested = contested(members);
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in &sorted_members {
        let list = out.get_mut(&m.member_id).expect("entry");
        for tp in &m.owned {
            if list.len() >= max_quota {
                break;
            }
            if all.contains(tp)
                && !contested.contains(tp)
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

/// Kafka's `AbstractStickyAssignor.ConstrainedAssignmentBuilder` (without racks), the algorithm
/// for a group whose members all subscribe to `topics`: with `P` partitions among `C` members,
/// each keeps its previous partitions (lowest partition number first) up to `floor(P/C)`, or up
/// to `ceil(P/C)` while fewer than `P % C` members have that many (members taken in the order
/// Java's `HashMap` holds their ids, as Kafka's loop meets them); the rest go round robin, in
/// topic and partition order, first to the members under `floor(P/C)` (by id), then to those
/// that may still take one more. Previous partitions as [`previous_owners`] settles them.
fn constrained_sticky(
    members: &[MemberSubscription],
    counts: &BTreeMap<String, i32>,
    topics: &BTreeSet<&str>,
) -> Assignment {
    let mut out = empty_assignment(members);
    let all: Vec<TopicPartition> = topics
        .iter()
        .filter_map(|t| counts.get(*t).map(|&n| (*t, n)))
        .flat_map(|(t, n)| (0..n).map(move |p| (t.to_string(), p)))
        .collect();
    let exists: BTreeSet<&TopicPartition> = all.iter().collect();
    let ids: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    let order = java_hash_map_order(&ids);
    let owned_of = previous_owners(members, &order, &exists);
    let (min_quota, max_quota) = (all.len() / members.len(), all.len().div_ceil(members.len()));
    let expected_over_min = all.len() % members.len();
    let mut over_min = 0usize;
    let mut under_min: Vec<String> = Vec::new();
    let mut at_min: VecDeque<String> = VecDeque::new();
    let mut assigned: BTreeSet<TopicPartition> = BTreeSet::new();
    for &id in &order {
        let mut owned = owned_of[id].clone();
        owned.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        let keep = if owned.len() < min_quota {
            under_min.push(id.to_string());
            owned.len()
        } else if owned.len() >= max_quota && over_min < expected_over_min {
            over_min += 1;
            if over_min == expected_over_min {
                at_min.clear();
            }
            max_quota
        } else {
            if over_min < expected_over_min {
                at_min.push_back(id.to_string());
            }
            min_quota
        };
        owned.truncate(keep);
        assigned.extend(owned.iter().cloned());
        out.get_mut(id).expect("entry").extend(owned);
    }
    under_min.sort_by(|a, b| java_string_cmp(a, b));
    at_min
        .make_contiguous()
        .sort_by(|a, b| java_string_cmp(a, b));
    // Round robin over the members under the minimum, restarting while some remain; then one
    // more each to those at the minimum.
    let mut next = 0usize;
    for tp in all.into_iter().filter(|tp| !assigned.contains(tp)) {
        let member = if next < under_min.len() {
            next += 1;
            under_min[next - 1].clone()
        } else if !under_min.is_empty() {
            next = 1;
            under_min[0].clone()
        } else if let Some(m) = at_min.pop_front() {
            m
        } else {
            // Kafka's quotas leave no partition without a member; should they, the least
            // loaded member takes it rather than losing it.
            out.iter()
                .min_by_key(|(_, l)| l.len())
                .map(|(m, _)| m.clone())
                .expect("members")
        };
        let list = out.get_mut(&member).expect("entry");
        list.push(tp);
        if list.len() == min_quota && next > 0 && under_min.get(next - 1) == Some(&member) {
            under_min.remove(next - 1);
            next -= 1;
            at_min.push_back(member);
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

/// Each member's previous partitions as Kafka's `AbstractStickyAssignor.allSubscriptionsEqual`
/// takes them, members met in `order`: a partition of a subscribed topic that exists, claimed
/// once. A partition two members claim goes to neither: their subscriptions carry the same
/// generation (a consumer sends it since KIP-792, the eager `StickyAssignor`'s
/// too), and Kafka takes a partition claimed twice in one generation from both.
fn previous_owners<'a>(
    members: &[MemberSubscription],
    order: &[&'a str],
    exists: &BTreeSet<&TopicPartition>,
) -> BTreeMap<&'a str, Vec<TopicPartition>> {
    let contested = contested(members);
    order
        .iter()
        .map(|&id| {
            let member = members.iter().find(|m| m.member_id == id).expect("listed");
            let owned = member
                .owned
                .iter()
                .filter(|tp| exists.contains(tp) && !contested.contains(*tp))
                .cloned()
                .collect();
            (id, owned)
        })
        .collect()
}

/// The partitions more than one member claims as previously owned.
fn contested(members: &[MemberSubscription]) -> BTreeSet<TopicPartition> {
    let mut claimed = BTreeSet::new();
    let mut twice = BTreeSet::new();
    for m in members {
        // A member listing a partition twice claims it once.
        let own: BTreeSet<&TopicPartition> = m.owned.iter().collect();
        for tp in own {
            if !claimed.insert(tp) {
                twice.insert(tp.clone());
            }
        }
    }
    twice
}

/// Java's `String.compareTo`, which the assignors sort member ids by: UTF-16 code units, so an
/// id with a character past U+FFFF (a surrogate pair, 0xD800..) sorts before one with a
/// character in U+E000..U+FFFF, where code points (Rust's `str` order) put it after.
fn java_string_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The order Java's `HashMap<String, _>` (default capacity) iterates `keys` in, inserted in the
/// given order: by bucket (`String.hashCode` spread as `HashMap.hash` spreads it, masked to the
/// table's size), then in insertion order within a bucket.
fn java_hash_map_order<'a>(keys: &[&'a str]) -> Vec<&'a str> {
    let mut capacity = 16usize;
    while keys.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let bucket = |key: &str| {
        let h = key.encode_utf16().fold(0i32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(i32::from(unit))
        }) as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    let mut order: Vec<(usize, usize, &str)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (bucket(k), i, *k))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, _, k)| k).collect()
}

/// What Kafka's `CooperativeStickyAssignor.assign` answers in one rebalance: `assignment` less
/// the partitions changing owner (one another member owned), which their new owners get in the
/// next rebalance, once their previous owners revoked them.
pub fn without_transfers(mut assignment: Assignment, members: &[MemberSubscription]) -> Assignment {
    for (id, list) in assignment.iter_mut() {
        list.retain(|tp| {
            !members
                .iter()
                .any(|m| &m.member_id != id && m.owned.contains(tp))
        });
    }
    assignment
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

    /// Java sorts member ids by UTF-16 code units: `c-😀` (a surrogate pair) before `c-\u{FFFD}`,
    /// the other way round from Rust's code-point order. Kafka 4.4's answers, from a black-box
    /// tester's run of its assignors.
    #[test]
    fn members_sort_as_java_strings_sort() {
        let counts = BTreeMap::from([("t".to_string(), 3)]);
        let members = [member("c-\u{FFFD}", &["t"]), member("c-😀", &["t"])];
        let range = assign(AssignmentStrategy::Range, &members, &counts).unwrap();
        assert_eq!(range["c-😀"], tps("t", &[0, 1]));
        assert_eq!(range["c-\u{FFFD}"], tps("t", &[2]));
        let round_robin = assign(AssignmentStrategy::RoundRobin, &members, &counts).unwrap();
        assert_eq!(round_robin["c-😀"], tps("t", &[0, 2]));
        assert_eq!(round_robin["c-\u{FFFD}"], tps("t", &[1]));
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

    fn owning(id: &str, topics: &[&str], owned: Vec<TopicPartition>) -> MemberSubscription {
        MemberSubscription {
            owned,
            ..member(id, topics)
        }
    }

    #[test]
    fn sticky_makes_kafkas_choice_for_one_subscription() {
        // Checked against Kafka's StickyAssignor: the partition left over goes to a member that
        // kept its minimum share rather than to the one that came with nothing.
        let counts = BTreeMap::from([("t0".to_string(), 3)]);
        let members = [
            member("m0", &["t0"]),
            owning("m1", &["t0"], tps("t0", &[0])),
        ];
        let a = assign(AssignmentStrategy::Sticky, &members, &counts).unwrap();
        assert_eq!(a["m0"], tps("t0", &[1]));
        assert_eq!(a["m1"], tps("t0", &[0, 2]));
        // A member keeps its lowest partitions, whatever order it lists them in.
        let counts = BTreeMap::from([("t0".to_string(), 2)]);
        let members = [
            owning("m0", &["t0"], tps("t0", &[1, 0])),
            member("m1", &["t0"]),
        ];
        let a = assign(AssignmentStrategy::Sticky, &members, &counts).unwrap();
        assert_eq!(
            (a["m0"].clone(), a["m1"].clone()),
            (tps("t0", &[0]), tps("t0", &[1]))
        );
        // One rebalance of the cooperative protocol holds back what changes owner.
        let members = [
            owning("m1", &["t0"], tps("t0", &[0, 1])),
            member("m0", &["t0"]),
        ];
        let a = assign(AssignmentStrategy::CooperativeSticky, &members, &counts).unwrap();
        let once = without_transfers(a, &members);
        assert_eq!(
            (once["m0"].clone(), once["m1"].clone()),
            (vec![], tps("t0", &[0]))
        );
    }

    #[test]
    fn java_hash_map_order_is_bucket_then_insertion_order() {
        // "Aa" and "BB" share String.hashCode 2112 (one bucket): insertion order; "m1" (3428,
        // bucket 4) before "m0" would be wrong: 3427 is bucket 3.
        assert_eq!(
            java_hash_map_order(&["m1", "BB", "m0", "Aa"]),
            ["BB", "Aa", "m0", "m1"]
        );
        // Past 12 keys the table doubles to 32 buckets: "m16" (hash 106322: bucket 3 of 16, 19 of 32) then
        // follows "m9" (3436, bucket 12).
        let keys: Vec<String> = (0..17).map(|i| format!("m{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let order = java_hash_map_order(&keys);
        let pos = |k: &str| order.iter().position(|x| *x == k).unwrap();
        assert!(pos("m9") < pos("m16"), "{order:?}");
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

    /// A partition two members of one generation claim is taken from both, under either
    /// protocol, as Kafka 4.4's `StickyAssignor` answers when subscriptions carry their
    /// generation (KIP-792): b keeps its uncontested t-3, c gets t-2 (a black-box tester; it
    /// went to b, and b's t-3 to c).
    #[test]
    fn sticky_takes_a_partition_claimed_twice_from_both() {
        let counts = BTreeMap::from([("t".to_string(), 4)]);
        let members = [
            owning("a", &["t"], tps("t", &[0, 1, 2])),
            owning("b", &["t"], tps("t", &[2, 3])),
            member("c", &["t"]),
        ];
        for strategy in [
            AssignmentStrategy::Sticky,
            AssignmentStrategy::CooperativeSticky,
        ] {
            let a = assign(strategy, &members, &counts).unwrap();
            assert_eq!(a["a"], tps("t", &[0, 1]), "{strategy:?}");
            assert_eq!(a["b"], tps("t", &[3]), "{strategy:?}");
            assert_eq!(a["c"], tps("t", &[2]), "{strategy:?}");
        }
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
