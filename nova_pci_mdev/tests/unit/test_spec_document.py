"""patches/spec/: the nova-specs document of the series, held to what
nova-specs checks before a reviewer reads it.

nova-specs' ``tests/test_titles.py`` parses every spec with docutils and
compares its section titles with those of the release's template, then
checks the lines (79 columns outside literal blocks, URLs and lines
without whitespace; no carriage return, trailing space or zero-width
space); its docs job builds the specs with Sphinx, warnings as errors.
Here, without Sphinx or the network, every ``.rst`` of ``patches/spec/``:

* parses with docutils without a single system message (infos and
  warnings count as errors);
* has exactly the template's top-level sections in the template's order,
  and in each the template's subsections, in order, as its last ones:
  extra subsections (the spec's own decisions) may only come before them,
  where nova-specs allows extra subsections too;
* keeps nova-specs' line rules;
* names its blueprint with its file name
  (``https://blueprints.launchpad.net/nova/+spec/<file name>``), as the
  template asks.
"""

import io
import os
import re

import docutils.core
import docutils.utils
import testtools

SPEC_DIR = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                        'patches', 'spec')
#: The sections of nova-specs' ``specs/2027.1-template.rst`` (the template
#: of the release after Nova 34.0.0), each with its subsections.
TEMPLATE = (
    ('Problem description', ('Use Cases',)),
    ('Proposed change', (
        'Alternatives', 'Data model impact', 'REST API impact',
        'Security impact', 'Notifications impact', 'Other end user impact',
        'Performance Impact', 'Other deployer impact', 'Developer impact',
        'Upgrade impact')),
    ('Implementation', ('Assignee(s)', 'Feature Liaison', 'Work Items')),
    ('Dependencies', ()),
    ('Testing', ()),
    ('Documentation Impact', ()),
    ('References', ()),
    ('History', ()),
)
WIDTH = 79
#: The first line of a docutils system message; the source lines it quotes
#: follow on lines of their own.
MESSAGE = re.compile(r'^.*?:\d*: \((?:DEBUG|INFO|WARNING|ERROR|SEVERE)/\d\) ')
BLUEPRINT = re.compile(
    r'^https://blueprints\.launchpad\.net/nova/\+spec/(\S+)\r?$', re.M)


def docutils_messages(text):
    """Every system message docutils has for ``text``, info level up, as
    its first line (``<string>:LINE: (LEVEL/N) what``); and the doctree."""
    stream = io.StringIO()
    doctree = docutils.core.publish_doctree(text, settings_overrides={
        'report_level': docutils.utils.Reporter.INFO_LEVEL,
        'halt_level': docutils.utils.Reporter.SEVERE_LEVEL + 1,
        'warning_stream': stream,
        'file_insertion_enabled': False,
        'raw_enabled': False,
    })
    lines = [line for line in stream.getvalue().splitlines()
             if MESSAGE.match(line)]
    return lines, doctree


def outline(doctree):
    """[(title, [subsection titles])] of the top-level sections."""
    found = []
    for node in doctree.children:
        if node.tagname == 'section':
            subsections = [child[0].astext() for child in node.children
                           if child.tagname == 'section']
            found.append((node[0].astext(), subsections))
    return found


def title_problems(sections, template=TEMPLATE):
    """How ``sections`` (see :func:`outline`) departs from ``template``."""
    names = [title for title, _ in sections]
    wanted = [title for title, _ in template]
    if names != wanted:
        return ['top-level sections %s; the template has %s'
                % (names, wanted)]
    out = []
    for (title, got), (_, required) in zip(sections, template):
        extra = len(got) - len(required)
        tail = got[extra:] if extra >= 0 else got
        if tuple(tail) != required:
            out.append('section %r ends with subsections %s; the '
                       "template's are %s" % (title, tail, list(required)))
        elif any(name in required for name in got[:extra]):
            out.append('section %r repeats a subsection of the template '
                       'before them: %s' % (title, got))
    return out


def line_problems(text, width=WIDTH):
    """nova-specs' line rules, one sentence per line broken."""
    out = []
    if '\r' in text:
        out.append('%d carriage return(s)' % text.count('\r'))
    literal = False
    for number, line in enumerate(text.split('\n'), 1):
        line = line.rstrip('\r')
        if '\u200b' in line:
            out.append('line %d: zero-width space' % number)
        if re.search(r'[ \t]+$', line):
            out.append('line %d: trailing whitespace' % number)
        if literal and (not line or line.startswith(' ')):
            continue
        literal = '::' in line
        if (len(line) > width and 'http://' not in line and
                'https://' not in line and re.search(r'\S\s', line.strip())):
            out.append('line %d: %d columns, more than %d'
                       % (number, len(line), width))
    return out


def spec_problems(text, name):
    """Everything that would stop ``name``.rst at nova-specs' checks."""
    messages, doctree = docutils_messages(text)
    out = ['docutils: %s' % message for message in messages]
    out.extend(title_problems(outline(doctree)))
    out.extend(line_problems(text))
    blueprints = BLUEPRINT.findall(text)
    if blueprints[:1] != [name]:
        out.append('blueprint URL names %s, the file is %s.rst'
                   % (blueprints[:1] or 'nothing', name))
    return out


def sample_spec(template=TEMPLATE, name='sample', body='Text.'):
    """A smallest spec with the sections of ``template``."""
    parts = ['=======', 'A title', '=======', '',
             'https://blueprints.launchpad.net/nova/+spec/%s' % name, '',
             body, '']
    for title, subsections in template:
        parts += [title, '=' * len(title), '', 'Text.', '']
        for subsection in subsections:
            parts += [subsection, '-' * len(subsection), '', 'Text.', '']
    return '\n'.join(parts)


def _with(section, subsections):
    return tuple((title, subsections if title == section else subs)
                 for title, subs in TEMPLATE)


class TestSpecDocument(testtools.TestCase):

    def test_the_spec_passes_what_nova_specs_checks(self):
        names = sorted(n[:-len('.rst')] for n in os.listdir(SPEC_DIR)
                       if n.endswith('.rst'))
        self.assertIn('pci-mdev-support', names)
        for name in names:
            with open(os.path.join(SPEC_DIR, name + '.rst'),
                      encoding='utf-8', newline='') as f:
                text = f.read()
            self.assertEqual([], spec_problems(text, name), name)

    def test_each_rule_is_enforced(self):
        proposed = dict(TEMPLATE)['Proposed change']
        self.assertEqual([], spec_problems(sample_spec(), 'sample'))
        # the spec's own decisions come before the template's subsections
        self.assertEqual([], spec_problems(sample_spec(_with(
            'Proposed change', ('Slot devices',) + proposed)), 'sample'))
        # long lines are fine in a literal block, with a URL, or unbroken
        for body in ('Example::\n\n  ' + ' '.join(['x'] * 50),
                     'See https://example.org/' + 'x' * 80 + ' for it.',
                     'x' * 90):
            self.assertEqual(
                [], spec_problems(sample_spec(body=body), 'sample'), body)
        missing = tuple(s for s in TEMPLATE if s[0] != 'Testing')
        swapped = list(TEMPLATE)
        swapped[3], swapped[4] = swapped[4], swapped[3]
        cases = [
            ('top-level sections', sample_spec(missing), 'sample'),
            ('top-level sections', sample_spec(tuple(swapped)), 'sample'),
            ('top-level sections',
             sample_spec(TEMPLATE + (('Notes', ()),)), 'sample'),
            ("section 'Proposed change' ends with", sample_spec(_with(
                'Proposed change', proposed + ('Slot devices',))),
             'sample'),
            ("section 'Implementation' ends with", sample_spec(_with(
                'Implementation', ('Assignee(s)', 'Work Items'))),
             'sample'),
            ('Unknown target name', sample_spec(body='See missing_.'),
             'sample'),
            ('without end-string', sample_spec(body='An *unclosed one.'),
             'sample'),
            ('84 columns, more than 79',
             sample_spec(body=' '.join(['word'] * 17)), 'sample'),
            ('trailing whitespace', sample_spec(body='Text. '), 'sample'),
            ('carriage return',
             sample_spec().replace('\n', '\r\n'), 'sample'),
            ('zero-width space', sample_spec(body='Te\u200bxt.'), 'sample'),
            ('blueprint URL names', sample_spec(), 'other'),
        ]
        for expected, text, name in cases:
            found = spec_problems(text, name)
            self.assertEqual(1, len(found), (expected, found))
            self.assertIn(expected, found[0])
        # a repeated title is also a docutils message (duplicate target);
        # the outline rule holds on its own
        self.assertIn("repeats a subsection", title_problems(
            outline(docutils_messages(sample_spec(_with(
                'Problem description', ('Use Cases', 'Use Cases'))))[1]))[0])
