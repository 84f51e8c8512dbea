"""Node-device XML snippets in the form libvirt 9.0 formats them.

Used by the discovery tests both as parser input and inside host XML files
for libvirt's real ``test:///<file>`` driver, so every snippet must also be
accepted by libvirt itself (except :func:`virtual_parent`, which libvirt
9.0 refuses in a host file).
"""

COMPUTER = """
  <device>
    <name>computer</name>
    <capability type='system'>
      <hardware><uuid>11111111-2222-3333-4444-555555555555</uuid></hardware>
      <firmware/>
    </capability>
  </device>"""


def _split(address):
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return int(domain, 16), int(bus, 16), int(slot, 16), int(function, 16)


def node_name(address):
    return 'pci_' + address.replace(':', '_').replace('.', '_')


def address_attrs(address):
    domain, bus, slot, function = _split(address)
    return ("<address domain='0x%04x' bus='0x%02x' slot='0x%02x' "
            "function='0x%x'/>" % (domain, bus, slot, function))


def mdev_types(*types, nested=False):
    """``types``: (id, name or None, availableInstances)."""
    body = ''
    for type_id, name, available in types:
        body += "<type id='%s'>" % type_id
        if name is not None:
            body += '<name>%s</name>' % name
        body += ('<deviceAPI>vfio-pci</deviceAPI><availableInstances>%d'
                 '</availableInstances></type>' % available)
    cap = "<capability type='mdev_types'>%s</capability>" % body
    if nested:
        cap = "<capability type='mdev_types'>%s</capability>" % cap
    return cap


def pci(address, vendor='8086', product='1528', numa=None, extra='',
        parent='computer', name=None):
    """A ``<device>`` with a pci capability; ``extra`` goes inside it."""
    domain, bus, slot, function = _split(address)
    numa_xml = '' if numa is None else "<numa node='%d'/>" % numa
    return """
  <device>
    <name>%s</name>
    <parent>%s</parent>
    <capability type='pci'>
      <domain>%d</domain>
      <bus>%d</bus>
      <slot>%d</slot>
      <function>%d</function>
      <product id='0x%s'>Product %s</product>
      <vendor id='0x%s'>Vendor %s</vendor>
      %s
      %s
    </capability>
  </device>""" % (name or node_name(address), parent, domain, bus, slot,
                  function, product, product, vendor, vendor, extra, numa_xml)


def pf(address, vfs, max_count=8, **kwargs):
    body = ''.join(address_attrs(vf) for vf in vfs)
    extra = ("<capability type='virt_functions' maxCount='%d'>%s"
             "</capability>" % (max_count, body))
    return pci(address, extra=extra, **kwargs)


def vf(address, pf_address, **kwargs):
    extra = ("<capability type='phys_function'>%s</capability>"
             % address_attrs(pf_address))
    return pci(address, extra=extra, parent=node_name(pf_address), **kwargs)


def gpu(address, types, vendor='10de', product='1eb8', numa=None):
    return pci(address, vendor=vendor, product=product, numa=numa,
               extra=mdev_types(*types))


def virtual_parent(name, sysfs_name, types, nested=True):
    return """
  <device>
    <name>%s</name>
    <path>/sys/devices/virtual/%s/%s</path>
    <parent>computer</parent>
    %s
  </device>""" % (name, sysfs_name, sysfs_name,
                  mdev_types(*types, nested=nested))


def mdev(uuid, parent, mdev_type, new_name=True, with_uuid=True,
         iommu_group=20):
    """An mdev; ``new_name``: libvirt >= 7.7's ``mdev_<uuid>_<parent>``."""
    name = mdev_name(uuid, parent, new_name)
    uuid_xml = '<uuid>%s</uuid>' % uuid if with_uuid else ''
    return """
  <device>
    <name>%s</name>
    <parent>%s</parent>
    <capability type='mdev'>
      <type id='%s'/>
      %s
      <iommuGroup number='%d'/>
    </capability>
  </device>""" % (name, parent, mdev_type, uuid_xml, iommu_group)


def mdev_name(uuid, parent, new_name=True):
    name = 'mdev_' + uuid.replace('-', '_')
    if new_name and parent.startswith('pci_'):
        name += parent[3:]
    return name


def host(*devices, memory_kib=8192000):
    """A host file for libvirt's test driver (no NUMA cells)."""
    return """<node>
  <cpu>
    <mode>auto</mode><model>i686</model><vendor>GenuineIntel</vendor>
    <nodes>1</nodes><sockets>1</sockets><cores>2</cores><threads>1</threads>
    <active>2</active><mhz>6000</mhz>
  </cpu>
  <memory>%d</memory>%s%s
</node>
""" % (memory_kib, COMPUTER, ''.join(devices))
