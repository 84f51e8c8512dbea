"""Inside the VM: the patched Nova 34.0.0 as one process (``tools/realhost
--series``).

``python -m nova_pci_mdev.tests.realhost.nova_all --config-file NOVA_CONF``
(the series venv's python) runs, in one process and native threading mode
(Nova 34.0.0's default for nova-compute):

* Placement (openstack-placement, its WSGI application on
  ``127.0.0.1:8778``, ``noauth2``);
* nova-api (the ``osapi_compute`` WSGI application on ``127.0.0.1:8774``,
  ``noauth2``), nova-conductor, nova-scheduler and nova-compute with the
  libvirt driver on ``qemu:///system``, each a ``nova.service.Service`` as
  their console scripts create them; their databases and Placement's are on
  the VM's MariaDB server (see series_guest);
* stand-ins for the services no step tests: an image service (one raw
  image, Glance's v2 API as Nova reads it), a network service that has no
  ports (every server is created with ``networks: none``) and, in the API
  pipeline, Keystone's token check (every request is the admin).

The services talk over oslo.messaging's in-process ``fake:/`` transport;
cell1's mapping has the transport ``none://cell1/`` so that the conductor and
the API reach nova-compute over that same transport (a second ``fake:/``
transport would be another, unconnected bus). Privileged calls run in this
process (it runs as root) instead of through a privsep daemon.

It prints ``nova-all: ready`` once nova-compute started and its host is
mapped, or ``nova-all: failed: ...`` and exits 2 when a service does not
start (nova-compute refusing its configuration is such a case), and runs
until SIGTERM.
"""

import argparse
import http.server
import json
import os
import signal
import socketserver
import sys
import threading
import traceback
import urllib.parse
import wsgiref.simple_server

#: The one image of the image stand-in: 1 MiB of zeros, raw. The guests
#: need no operating system: QEMU runs the firmware, which finds nothing to
#: boot; the domain is running with its devices.
IMAGE_ID = '155d900f-4e14-4e4c-a73d-069cbf4541e6'
IMAGE_SIZE = 1024 * 1024
PORTS = {'placement': 8778, 'api': 8774, 'image': 9292, 'network': 9696}


class _ThreadingServer(socketserver.ThreadingMixIn,
                       wsgiref.simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietWSGIHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


def serve_wsgi(app, port):
    httpd = wsgiref.simple_server.make_server(
        '127.0.0.1', port, app, server_class=_ThreadingServer,
        handler_class=_QuietWSGIHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True,
                     name='wsgi-%d' % port).start()
    return httpd


# -- stand-ins -------------------------------------------------------------

def _image_record():
    return {
        'id': IMAGE_ID, 'name': 'realhost-zeros', 'status': 'active',
        'disk_format': 'raw', 'container_format': 'bare',
        'size': IMAGE_SIZE, 'virtual_size': IMAGE_SIZE, 'min_disk': 0,
        'min_ram': 0, 'visibility': 'public', 'protected': False,
        'os_hidden': False, 'owner': 'admin', 'tags': [],
        'created_at': '2026-01-01T00:00:00Z',
        'updated_at': '2026-01-01T00:00:00Z',
        'file': '/v2/images/%s/file' % IMAGE_ID,
        'self': '/v2/images/%s' % IMAGE_ID, 'schema': '/v2/schemas/image'}


class _StandInHandler(http.server.BaseHTTPRequestHandler):
    """Answers GETs: the image service's one image and its schema, the
    network service's empty collections. Anything else is 404."""

    protocol_version = 'HTTP/1.1'
    kind = None

    def log_message(self, *args):
        pass

    def _send(self, status, body, content_type='application/json'):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path.rstrip('/')
        if self.kind == 'image':
            return self._image(path)
        return self._network(path)

    def _image(self, path):
        while path.startswith('/v2/v2'):
            path = path[3:]
        if path in ('', '/versions'):
            return self._send(200, {'versions': [{
                'id': 'v2.9', 'status': 'CURRENT', 'links': [{
                    'rel': 'self',
                    'href': 'http://127.0.0.1:%d/v2/' % PORTS['image']}]}]})
        if path.startswith('/v2/schemas/image'):
            # Glance's base properties (typeless); Nova's image API keeps
            # these at the top of its image dicts
            return self._send(200, {
                'name': 'image', 'properties': {
                    name: {} for name in list(_image_record()) + [
                        'checksum', 'os_hash_algo', 'os_hash_value',
                        'direct_url', 'locations']},
                'additionalProperties': {'type': 'string'}})
        if path == '/v2/images/%s' % IMAGE_ID:
            return self._send(200, _image_record())
        if path == '/v2/images/%s/file' % IMAGE_ID:
            return self._send(200, b'\0' * IMAGE_SIZE,
                              'application/octet-stream')
        return self._send(404, {'message': 'no such image: %s' % path})

    def _network(self, path):
        if path in ('', '/v2.0'):
            return self._send(200, {'versions': [{'id': 'v2.0',
                                                  'status': 'CURRENT'}]})
        name = path.rsplit('/', 1)[-1]
        if name.endswith('.json'):
            name = name[:-len('.json')]
        if path.startswith('/v2.0/') and path.count('/') == 2:
            return self._send(200, {name: []})
        return self._send(404, {'NeutronError': {
            'type': 'NotFound', 'message': 'no %s here' % path}})


class IdentityStandIn:
    """Stands in for Keystone's token check (keystonemiddleware's
    ``authtoken``) in the API pipeline: every request is the admin user of
    project ``admin``, as keystonemiddleware would describe it in the
    headers Nova's own ``keystonecontext`` filter then reads. Nova 34.0.0
    has no ``noauth2`` pipeline any more."""

    def __init__(self, app):
        self.app = app

    @classmethod
    def factory(cls, global_config, **local_config):
        return cls

    def __call__(self, environ, start_response):
        token = environ.get('HTTP_X_AUTH_TOKEN') or 'admin:admin'
        user, _, project = token.partition(':')
        environ.update({
            'HTTP_X_IDENTITY_STATUS': 'Confirmed',
            'HTTP_X_AUTH_TOKEN': token,
            'HTTP_X_USER_ID': user, 'HTTP_X_USER_NAME': user,
            'HTTP_X_PROJECT_ID': project or user,
            'HTTP_X_PROJECT_NAME': project or user,
            'HTTP_X_ROLES': 'admin,member,reader',
        })
        return self.app(environ, start_response)


def api_paste(original):
    """Nova's api-paste.ini with the identity stand-in for ``authtoken``."""
    text = original.replace(' authtoken keystonecontext ',
                            ' realhost_identity keystonecontext ')
    if ' realhost_identity ' not in text:
        raise ValueError('api-paste.ini has no "authtoken keystonecontext" '
                         'pipeline to change')
    return text + (
        '\n[filter:realhost_identity]\npaste.filter_factory = '
        'nova_pci_mdev.tests.realhost.nova_all:IdentityStandIn.factory\n')


def serve_stand_in(kind, port):
    handler = type('%sHandler' % kind.title(), (_StandInHandler,),
                   {'kind': kind})
    httpd = socketserver.ThreadingTCPServer(('127.0.0.1', port), handler,
                                            bind_and_activate=False)
    httpd.daemon_threads = True
    httpd.allow_reuse_address = True
    httpd.server_bind()
    httpd.server_activate()
    threading.Thread(target=httpd.serve_forever, daemon=True,
                     name='%s-stand-in' % kind).start()
    return httpd


# -- Nova and Placement ----------------------------------------------------

def start_placement(config_dir):
    os.environ['OS_PLACEMENT_CONFIG_DIR'] = config_dir
    from placement import wsgi as placement_wsgi
    app = placement_wsgi.init_application()
    return serve_wsgi(app, PORTS['placement'])


def start_nova(config_file):
    from oslo_log import log as logging
    from oslo_privsep import priv_context

    from nova.api.openstack import wsgi_app
    from nova.compute import rpcapi as compute_rpcapi
    import nova.conf
    from nova import config
    from nova import context
    from nova import objects
    from nova.objects import host_mapping
    import nova.privsep
    from nova import service
    from nova.api import wsgi as nova_wsgi

    conf = nova.conf.CONF
    config.parse_args(['nova-all', '--config-file', config_file])
    logging.setup(conf, 'nova')
    objects.register_all()
    priv_context.init(root_helper=['false'])
    # root already: privileged calls run here, not in a privsep daemon
    nova.privsep.sys_admin_pctxt.set_client_mode(False)
    try:
        import os_vif
        os_vif.initialize()
    except Exception:        # no VIF is plugged: networks are 'none'
        traceback.print_exc()

    services = []
    for binary, topic in (('nova-conductor', 'conductor'),
                          ('nova-scheduler', 'scheduler')):
        svc = service.Service.create(binary=binary, topic=topic)
        svc.start()
        services.append(svc)
    wsgi_app._setup_service(conf.host, 'osapi_compute')
    api = nova_wsgi.Loader().load_app('osapi_compute')
    serve_wsgi(api, PORTS['api'])
    compute = service.Service.create(
        binary='nova-compute', topic=compute_rpcapi.RPC_TOPIC)
    compute.start()
    services.append(compute)
    host_mapping.discover_hosts(context.get_admin_context())
    return services


def main(argv=None):
    # first of all, as Nova's console scripts do: native threading (the
    # default of nova-compute in 34.0.0), eventlet kept out
    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'true')
    from nova import monkey_patch
    monkey_patch.patch(backend='threading')
    parser = argparse.ArgumentParser(prog='nova_all')
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--placement-config-dir', default='/etc/placement')
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    try:
        serve_stand_in('image', PORTS['image'])
        serve_stand_in('network', PORTS['network'])
        start_placement(args.placement_config_dir)
        services = start_nova(args.config_file)
    except BaseException as exc:
        traceback.print_exc()
        print('nova-all: failed: %s: %s' % (type(exc).__name__, exc),
              flush=True)
        os._exit(2)
    print('nova-all: ready', flush=True)
    done.wait()
    for svc in reversed(services):
        try:
            svc.stop()
        except Exception:
            traceback.print_exc()
    print('nova-all: stopped', flush=True)
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
