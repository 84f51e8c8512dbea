"""Option registration: Nova's names, deprecated names, dynamic groups."""

from oslo_config import cfg

from nova_pci_mdev import conf
from nova_pci_mdev import exception
from nova_pci_mdev.tests.unit.conf import base

#: A nova.conf of a real compute node, trimmed: many unrelated options.
REAL_NOVA_CONF = """
[DEFAULT]
transport_url = rabbit://nova:secret@ctl:5672/
my_ip = 192.0.2.10
compute_driver = libvirt.LibvirtDriver
instances_path = $state_path/instances
log_dir = /var/log/nova
[api_database]
connection = mysql+pymysql://nova:secret@ctl/nova_api
[filter_scheduler]
enabled_filters = ComputeFilter,NUMATopologyFilter,PciPassthroughFilter
[keystone_authtoken]
www_authenticate_uri = http://ctl:5000/
[libvirt]
virt_type = kvm
cpu_mode = host-passthrough
[neutron]
auth_type = password
[placement]
region_name = RegionOne
[pci]
device_spec = {"vendor_id": "10de"}
device_spec = [{"vendor_id": "8086", "product_id": "154c",
                "physical_network": "physnet1"}]
alias = {"vendor_id": "10de", "mdev_type": "nvidia-35", "name": "vGPU",
         "numa_policy": "required"}
report_in_placement = False
[devices]
enabled_mdev_types = nvidia-35, mlx5_core-local
[mdev_nvidia-35]
device_addresses = 0000:84:00.0,0000:85:00.0
[mdev_mlx5_core-local]
device_addresses = 0000:86:00.0
mdev_class = mlx5
max_instances = 8
[oslo_concurrency]
lock_path = /var/lib/nova/tmp
"""


class NewConfigTest(base.ConfTestCase):

    def test_real_nova_conf_loads(self):
        c = self.load(REAL_NOVA_CONF)
        self.assertEqual(2, len(c.pci.device_spec))
        self.assertEqual(['nvidia-35', 'mlx5_core-local'],
                         c.devices.enabled_mdev_types)
        self.assertEqual(['0000:84:00.0', '0000:85:00.0'],
                         c['mdev_nvidia-35'].device_addresses)
        self.assertEqual(8, c['mdev_mlx5_core-local'].max_instances)
        self.assertEqual('VGPU', c['mdev_nvidia-35'].mdev_class)
        self.assertEqual([], conf.validate(c))
        settings = conf.load_settings(c)
        self.assertEqual(('nvidia-35', 'mlx5_core-local'),
                         settings.enabled_mdev_types)
        self.assertEqual('CUSTOM_MLX5',
                         settings.resource_class_of('mlx5_core-local'))

    def test_fresh_objects(self):
        self.assertIsNot(conf.new_config(), conf.new_config())
        c = conf.new_config()
        self.assertEqual([], c.pci.device_spec)
        self.assertEqual([], c.pci.alias)
        self.assertEqual([], c.devices.enabled_mdev_types)

    def test_deprecated_names(self):
        cases = [
            ('[pci]\npassthrough_whitelist = {"vendor_id": "10de"}\n',
             'pci', 'device_spec', ['{"vendor_id": "10de"}']),
            ('[DEFAULT]\npci_passthrough_whitelist = {"vendor_id": "8086"}\n',
             'pci', 'device_spec', ['{"vendor_id": "8086"}']),
            ('[DEFAULT]\npci_alias = {"name": "a"}\n',
             'pci', 'alias', ['{"name": "a"}']),
            ('[devices]\nenabled_vgpu_types = nvidia-35\n',
             'devices', 'enabled_mdev_types', ['nvidia-35']),
            ('[devices]\nenabled_mdev_types = nvidia-35\n'
             '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0\n',
             'mdev_nvidia-35', 'device_addresses', ['0000:84:00.0']),
            ('[devices]\nenabled_mdev_types = nvidia-35\n'
             '[vgpu_nvidia-35]\nmdev_class = CUSTOM_A\nmax_instances = 2\n',
             'mdev_nvidia-35', 'max_instances', 2),
        ]
        for text, group, option, expected in cases:
            self.assertEqual(expected, self.load(text)[group][option], text)

    def test_new_group_wins_over_deprecated(self):
        c = self.load("""
            [devices]
            enabled_mdev_types = t1
            [vgpu_t1]
            device_addresses = 0000:01:00.0
            [mdev_t1]
            device_addresses = 0000:02:00.0
            """)
        self.assertEqual(['0000:02:00.0'], c.mdev_t1.device_addresses)

    def test_dynamic_groups_only_for_enabled_safe_types(self):
        c = self.load("""
            [devices]
            enabled_mdev_types = t1, ../t2
            [mdev_t3]
            device_addresses = 0000:02:00.0
            """)
        self.assertEqual([], c.mdev_t1.device_addresses)
        self.assertRaises(cfg.NoSuchOptError, lambda: c['mdev_t3'])
        self.assertRaises(cfg.NoSuchOptError, lambda: c['mdev_../t2'])

    def test_args_config_file(self):
        path = self.write('[pci]\nalias = {"name": "x"}\n')
        c = conf.new_config(args=['--config-file', path])
        self.assertEqual(['{"name": "x"}'], c.pci.alias)

    def test_several_files(self):
        a = self.write('[devices]\nenabled_mdev_types = t1\n', 'a.conf')
        b = self.write('[mdev_t1]\nmdev_class = foo\n', 'b.conf')
        c = conf.new_config([a, b])
        self.assertEqual('foo', c.mdev_t1.mdev_class)

    def test_bad_files(self):
        cases = [
            (self.tmp + '/missing.conf', 'not found'),
            (self.write('[pci\nx = 1\n', 'broken.conf'), 'cannot be parsed'),
        ]
        for path, words in cases:
            exc = self.assertRaises(exception.ConfigErrors,
                                    conf.new_config, [path])
            self.assertIn(words, str(exc))
            self.assertIn(path, str(exc))

    def test_list_opts(self):
        names = {(g.name, o.name) for g, opts in conf.list_opts()
                 for o in opts}
        self.assertEqual({('pci', 'alias'), ('pci', 'device_spec'),
                          ('devices', 'enabled_mdev_types')}, names)
