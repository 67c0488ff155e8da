"""The CPU plan per node of a Ray cluster (budget.plan_nodes): the local pool's rule on each
node's own CPUs and memory, slots round-robin across the nodes, a small run spread over them.
(The real two-node cluster: test_ray_cluster.py.)"""

from __future__ import annotations

from mineru_cli.budget import GiB, NodeCpus, plan_cpus, plan_nodes, slot_order

A, B = NodeCpus("a" * 56, "host/aaaaaa", 1, 8 * GiB), NodeCpus("b" * 56, "host/bbbbbb", 2, 8 * GiB)


def shape(plans):
    return [(n.name, p.workers, p.threads) for n, p in plans]


def test_each_node_is_planned_on_its_own_cpus_and_memory():
    assert shape(plan_nodes([A, B])) == [("host/aaaaaa", 1, 1), ("host/bbbbbb", 2, 1)]
    big = NodeCpus("c" * 56, "big/cccccc", 8, 3 * GiB)  # 8 CPUs, room for 3 workers
    (node, plan), = plan_nodes([big])  # fmt: skip
    assert (plan.workers, plan.threads) == (3, 2) and plan.why == plan_cpus(8, memory=3 * GiB, cores=8).why
    assert shape(plan_nodes([A, B], engine="vlm")) == [("host/aaaaaa", 1, 1), ("host/bbbbbb", 1, 2)]
    assert shape(plan_nodes([A, B], workers=1)) == [("host/aaaaaa", 1, 1), ("host/bbbbbb", 1, 2)]  # per node


def test_slots_alternate_across_nodes_and_a_small_run_is_spread_over_them():
    assert [n.name for n, _ in slot_order(plan_nodes([A, B]))] == ["host/aaaaaa", "host/bbbbbb", "host/bbbbbb"]
    assert shape(plan_nodes([A, B], pages=2)) == [("host/aaaaaa", 1, 1), ("host/bbbbbb", 1, 2)]
    assert shape(plan_nodes([A, B], pages=1)) == [("host/aaaaaa", 1, 1)]
    assert shape(plan_nodes([A, B], pages=50)) == shape(plan_nodes([A, B]))


def test_a_private_instance_decides_spinning_on_the_real_cores():
    # --cpus 4 on a 2-core machine: 4 slots of 1 thread, no spinning (the local pool's plan)
    node = NodeCpus("d" * 56, "here/dddddd", 4, 16 * GiB)
    ((_, plan),) = plan_nodes([node], cores=2)
    assert plan == plan_cpus(4, cores=2, memory=16 * GiB) and not plan.spinning
