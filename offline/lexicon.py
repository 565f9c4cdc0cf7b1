"""The offline extractor's word lists, loaded once from ``offline/data/``.

The offline extractor runs with no model and no download, so everything it knows about
English news is in those files: a small gazetteer (countries, capitals, US states, major
cities and regions) with its aliases, the words that mark a person (titles), an organisation
(suffixes and heads) or an event, and the words that must never become entities on their own
(sentence starters, Reuters table words and trailers, months, units). The lists are data, not
logic: they are plain text, one entry per line (``geo_aliases.json`` is a mapping), so that
tuning them never touches the extractor and a diff of a list shows words, not code. This
module only reads them and derives the composite sets the rules use (``OF_HEADS``,
``GEO_INDEX``, ``SOLO_STOP``, ``EDGE_STOP``).
"""

from __future__ import annotations

import json
from importlib.resources import files

from graph.keys import entity_key

_DATA = files("offline") / "data"


def _lines(name: str) -> tuple[str, ...]:
    text = (_DATA / name).read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def _words(name: str) -> frozenset[str]:
    return frozenset(_lines(name))


# Canonical geo names; aliases map onto them. Multi-word names are matched as token runs.
_GEO_NAMES = _lines("geo_names.txt")

# entity key of an alias -> canonical display name ("u s" -> "United States").
GEO_ALIASES: dict[str, str] = json.loads((_DATA / "geo_aliases.json").read_text(encoding="utf-8"))

# Maximum number of tokens in a gazetteer name ("Papua New Guinea", "Rio de Janeiro").
GEO_MAX_TOKENS = 3

# Words that introduce a person when they precede a name inside a capitalised run.
TITLES = _words("titles.txt")

# Portfolio words qualify a title ("Finance Minister", "Secretary of State"); they are not names.
PORTFOLIO = _words("portfolio.txt")

# Organisation suffixes dropped from display names so "Texaco Inc" and "Texaco" share a key.
CORPORATE_SUFFIXES = _words("corporate_suffixes.txt")

# A run containing one of these words names an organisation.
ORG_HEADS = _words("org_heads.txt")

# Heads after which "of" continues a name ("Bank of Japan", "Gulf of Mexico"): every
# organisation head, and the places and offices of ``of_heads.txt``.
OF_HEADS = ORG_HEADS | _words("of_heads.txt")

# A run ending with one of these words names an event.
EVENT_HEADS = _words("event_heads.txt")

# A run ending with one of these words names a place ("Downing Street", "Sao Paulo State").
GEO_HEADS = _words("geo_heads.txt")

# Heads after which "on" continues a name ("General Agreement on Tariffs and Trade").
ON_HEADS = _words("on_heads.txt")

# Demonym endings: "Nicaraguan", "Texans", "Iraqi" are adjectives of a gazetteer place.
DEMONYM_ENDINGS = _lines("demonym_endings.txt")

# Lower-case particles that stay inside a capitalised name ("Ciriaco De Mita", "von Weizsaecker").
NAME_PARTICLES = _words("name_particles.txt")

# Function words and common sentence starters: stripped from the front of a run.
FUNCTION_WORDS = _words("function_words.txt")

# Common nouns and verbs that start Reuters sentences ("Analysts said ..."): stripped from
# the front of a run only when the run starts a sentence.
STARTER_WORDS = _words("starter_words.txt")

# Names that keep their possessive: "Moody's Investors Service" is one organisation.
POSSESSIVE_NAMES = _words("possessive_names.txt")

# Names with "and" inside; otherwise "and" ends a run ("Britain and France" are two places).
AND_NAMES = frozenset(tuple(name.split()) for name in _lines("and_names.txt"))

# Month and day names: never entities, stripped from either end of a run.
CALENDAR = _words("calendar.txt")

# Reuters table words, units and trailers: never entities, stripped from either end of a run.
BOILERPLATE = _words("boilerplate.txt")

# Words too generic to name an entity alone (they may still sit inside a longer name).
GENERIC = _words("generic.txt")

# Reuters table words: a paragraph that starts with one of these and carries digits is a table.
TABLE_WORDS = _words("table_words.txt")

# Abbreviations whose final period does not end a sentence.
ABBREVIATIONS = _words("abbreviations.txt")

# Name suffixes dropped from person names so "James A. Baker III" and "James Baker" merge.
NAME_SUFFIXES = _words("name_suffixes.txt")

# Nationality adjectives: never entities alone, dropped from the front of a name.
DEMONYMS = _words("demonyms.txt")

# Lower-case words that, right before or after a name, say it is a person's.
PERSON_ROLE_WORDS = _words("person_role_words.txt")

# Common first names across cultures: a run that starts with one (and has two to four words)
# is a person unless another rule says otherwise. Names that are also common English words,
# months, places or company names (May, Will, Grant, Chase, Dean, Morgan, Jordan) are left out.
FIRST_NAMES = _words("first_names.txt")

# entity key of a gazetteer name or alias -> canonical display name
GEO_INDEX: dict[str, str] = {entity_key(name): name for name in _GEO_NAMES} | GEO_ALIASES

# entity keys of the wide gazetteer (``places.txt``: countries, US states, cities of 100,000
# people or more, from GeoNames by ``offline.refresh_gazetteers``): the type of a name that nothing
# else explains, instead of the fallback. It does not cut runs as ``GEO_INDEX`` does: a city's
# name inside a company's ("Hamilton Oil") stays the company's.
PLACES = frozenset(entity_key(name) for name in _lines("places.txt")) | frozenset(GEO_INDEX)

# Given names in Latin letters from many languages (``given_names.txt``, from faker's person
# providers by ``offline.refresh_gazetteers``): a name of two to four capitalised words that
# starts with one and that nothing else explains is a person, instead of the fallback. Unlike
# ``FIRST_NAMES`` it never cuts a run.
GIVEN_NAMES = _words("given_names.txt") | FIRST_NAMES

# Words that can never be an entity on their own, except the institutions of
# ``solo_names.txt`` ("Treasury", "Kremlin", "Bundesbank"), which are names by themselves.
SOLO_STOP = (
    FUNCTION_WORDS
    | CALENDAR
    | BOILERPLATE
    | GENERIC
    | TITLES
    | PORTFOLIO
    | DEMONYMS
    | CORPORATE_SUFFIXES
    | EVENT_HEADS
    | TABLE_WORDS
    | NAME_PARTICLES
    | STARTER_WORDS
    | ORG_HEADS
) - _words("solo_names.txt")

# Words stripped from either end of a run ("March", "Reuter", "Mln").
EDGE_STOP = CALENDAR | BOILERPLATE
