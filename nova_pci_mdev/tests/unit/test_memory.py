"""memory.release_freed: malloc_trim where the C library is glibc."""

import platform
import sys

import testtools

from nova_pci_mdev import memory


class ReleaseFreedTest(testtools.TestCase):

    def test_runs_on_glibc_and_is_a_no_op_elsewhere(self):
        glibc = (sys.platform.startswith('linux')
                 and platform.libc_ver()[0] == 'glibc')
        self.assertIs(glibc, memory.release_freed())
