"""Floors: what the least Python code must spend on each workload.

A worker of the runner like :mod:`benchmarks.ours` (``python -m
benchmarks.floors --serve``), standard library only (plus ``libvirt`` for
the discovery floor), so that the report can say how far each workload of
ours is from the cost of merely touching its input once:

* ``first_sync``: one new dict per device record (the record plus a
  status) indexed by address, and a count per pool key (vendor, product,
  dev_type, mdev_type, NUMA node); :data:`~benchmarks.timing.FIRST_SYNCS`
  samples a run, as on our side;
* ``resync``: the records compared with the ones applied last (a fresh
  ``json.loads`` each, one dict lookup and one dict comparison per record),
  and the device count checked;
* ``query``: one lookup per allowed NUMA node in the pool counts;
* ``discovery``: ``listAllDevices`` of the libvirt test driver, then
  ``name()`` and ``XMLDesc(0)`` of every node device (no parsing).

Same clock, samples and garbage collection as the workloads
(:mod:`benchmarks.timing`). Requests: ``{"op": "tracker", "records":
PATH}`` and ``{"op": "discovery", "host": PATH}``.
"""

import argparse
import json
import sys

from benchmarks import timing

#: listAllDevices flags of discovery: PCI_DEV | MDEV_TYPES | MDEV.
LIST_FLAGS = (1 << 1) | (1 << 13) | (1 << 14)
#: The pool the vGPU alias asks for (see benchmarks.hostgen).
QUERY_KEY = ('10de', '1eb8', 'mdev-vf', 'nvidia-222')
QUERY_NODES = (1,)


def first_sync(records):
    devices = {}
    counts = {}
    for record in records:
        devices[record['address']] = dict(record, status='available')
        key = (record['vendor_id'], record['product_id'],
               record['dev_type'], record['mdev_type'], record['numa_node'])
        counts[key] = counts.get(key, 0) + 1
    return devices, counts


def resync(applied, records):
    changed = [r for r in records if applied.get(r['address']) != r]
    return changed, len(records) == len(applied)


def query(counts):
    return sum(counts.get(QUERY_KEY + (node,), 0)
               for node in QUERY_NODES) >= 1


def _check(condition, what):
    if not condition:
        raise AssertionError('floor sanity check failed: %s' % what)


def one_run(text, loops):
    samples = {'first_sync': []}
    for _ in range(timing.FIRST_SYNCS):
        seconds, (devices, counts) = timing.timed(first_sync,
                                                  json.loads(text))
        samples['first_sync'].append(seconds)
    applied = {r['address']: r for r in json.loads(text)}
    seconds, (changed, same) = timing.timed(resync, applied,
                                            json.loads(text))
    _check(not changed and same and len(devices) == len(applied),
           'nothing changed')
    samples['resync'] = seconds
    _check(query(counts), 'the pool has a vGPU slot on node 1')
    samples['query'], loops['query'] = timing.per_call(
        lambda: query(counts), loops.get('query'))
    return {'samples': samples}


def one_discovery(path):
    import libvirt

    libvirt.registerErrorHandler(lambda *args: None, None)
    conn = libvirt.open('test://' + path)
    try:
        seconds, listed = timing.timed(lambda: [
            (dev.name(), dev.XMLDesc(0))
            for dev in conn.listAllDevices(LIST_FLAGS)])
    finally:
        conn.close()
    _check(listed, 'the host lists node devices')
    return {'samples': {'discovery': seconds}, 'node_devices': len(listed)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--serve', action='store_true', required=True)
    parser.parse_args(argv)
    texts = {}
    loops = {}

    def tracker(request):
        path = request['records']
        if path not in texts:
            with open(path) as f:
                texts[path] = f.read()
        return one_run(texts[path], loops.setdefault(path, {}))

    timing.serve({'tracker': tracker,
                  'discovery': lambda r: one_discovery(r['host'])})
    return 0


if __name__ == '__main__':
    sys.exit(main())
