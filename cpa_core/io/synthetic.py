"""A seeded generator of a fully synthetic demo dataset: a person registry and de-identified case notes.

Each synthetic person has quasi-identifiers of increasing specificity: coarse demographics (age band,
gender, occupation, city), Zipf-distributed keywords and dated life/medical events, and one or two
near-unique details in a free-text profile. Each document is a short clinical case summary about one
person. It mentions a few of the person's keywords, events and details (``MENTIONED``) and is released
through one of three mechanisms (``group``) that treat each quasi-identifier with different
probabilities (``POLICIES``): kept verbatim, coarsened ("a city in Scotland"), masked ("[LOCATION]") or
dropped. Releases are imperfect but not hopeless: apart from a share of well-protected documents
(``PROTECTED_SHARE``, most of them manually redacted), one event or detail usually slips through
verbatim (``EVENT_SLIP``, ``DETAIL_SLIP``), so that the three knowledge levels of ``sample_data/audit.toml``
give visibly different certificates. About 1% of documents are about people absent from the registry
(``X0001``...): enough to show the open world (a candidate-miss rate), few enough that the conservative miss
policy, which scores them ``+inf``, leaves a finite threshold at the sample's declared levels in every stratum,
although they gather in the strata where the attacker is unsure.

Everything is drawn from ``numpy.random.default_rng(seed)`` in a fixed order, so a seed always gives
byte-identical files. No real person is described.
"""

from __future__ import annotations

import string
from itertools import zip_longest
from pathlib import Path

import numpy as np
import pandas as pd


def _words(text: str) -> tuple[str, ...]:
    """A vocabulary written as comma-separated text; line breaks and indentation are ignored."""
    return tuple(" ".join(item.split()) for item in text.split(","))


GROUPS = ("manual_redaction", "ner_masking", "generalisation")
GROUP_SHARES = (0.34, 0.33, 0.33)
OPEN_WORLD_SHARE = 0.01
MAX_DOCS_PER_PERSON = 4
MODES = ("keep", "coarsen", "mask", "drop")
# probability of each of MODES, per release mechanism and quasi-identifier
POLICIES = {
    "manual_redaction": {"age": (.10, 0, .50, .40), "occupation": (.10, 0, .40, .50), "city": (.05, 0, .50, .45),
                         "keyword": (.25, 0, 0, .75), "event": (.10, 0, .30, .60), "detail": (.35, 0, .35, .30)},
    "ner_masking": {"age": (.35, .05, .40, .20), "occupation": (.50, 0, .20, .30), "city": (.25, 0, .50, .25),
                    "keyword": (.55, 0, 0, .45), "event": (.10, 0, .40, .50), "detail": (.40, 0, .30, .30)},
    "generalisation": {"age": (.10, .60, 0, .30), "occupation": (.10, .50, 0, .40), "city": (.05, .60, 0, .35),
                       "keyword": (.40, .30, 0, .30), "event": (.15, .50, 0, .35), "detail": (.35, .40, 0, .25)},
}
# how many of the person's keywords, events and details a case summary mentions (at least, at most);
# the release policy then applies to each mentioned item
MENTIONED = {"keyword": (1, 2), "event": (1, 2), "detail": (1, 1)}
# share of documents whose release removes every keyword, event and detail (a careful release)
PROTECTED_SHARE = {"manual_redaction": 0.08, "ner_masking": 0.01, "generalisation": 0.01}
# probability that one mentioned event, or the mentioned detail, is left verbatim by a release that
# left none verbatim: redactors and taggers rarely catch everything
EVENT_SLIP = {"manual_redaction": 0.60, "ner_masking": 1.0, "generalisation": 1.0}
DETAIL_SLIP = {"manual_redaction": 0.75, "ner_masking": 1.0, "generalisation": 1.0}
# NER masking tags entities by type; a human redactor writes [REDACTED] over the whole phrase
NER_TAGS = {"age": "[AGE]", "occupation": "[OCCUPATION]", "place": "[LOCATION]", "name": "[NAME]", "year": "[DATE]"}
REDACTED = "[REDACTED]"

AGE_BANDS = _words("18-29, 30-39, 40-49, 50-59, 60-69, 70-79, 80-89")
AGE_WEIGHTS = (0.14, 0.16, 0.17, 0.18, 0.16, 0.12, 0.07)
DECADE_WORDS = _words("twenties, thirties, forties, fifties, sixties, seventies, eighties")
GENDERS = ("female", "male", "non-binary")
GENDER_WEIGHTS = (0.50, 0.48, 0.02)
PRONOUNS = {"female": ("she", "her"), "male": ("he", "his"), "non-binary": ("the patient", "their")}
GENDER_NOUNS = {"female": ("woman", "female patient", "female"), "male": ("man", "male patient", "male"),
                "non-binary": ("patient", "non-binary patient", "person")}
# occupation -> sector and city -> region (the generalised forms), in decreasing frequency
OCCUPATIONS = {
    "nurse": "healthcare", "teacher": "education", "retail assistant": "retail", "care worker": "social care",
    "office administrator": "administration", "bus driver": "transport", "electrician": "the building trades",
    "accountant": "finance", "chef": "hospitality", "software developer": "technology",
    "police officer": "the public services", "plumber": "the building trades", "hairdresser": "personal services",
    "pharmacist": "healthcare", "farmer": "agriculture", "solicitor": "the legal sector",
    "architect": "construction", "postal worker": "logistics", "librarian": "the public sector",
    "firefighter": "the emergency services", "dentist": "healthcare", "civil engineer": "engineering",
    "journalist": "the media", "veterinary surgeon": "animal care", "airline pilot": "aviation",
}
CITIES = {
    "Manchester": "the north of England", "Leeds": "the north of England", "Glasgow": "Scotland",
    "Bristol": "the south-west", "Sheffield": "the north of England", "Cardiff": "Wales", "Edinburgh": "Scotland",
    "Newcastle": "the north-east", "Norwich": "the east of England", "Exeter": "the south-west",
    "York": "the north of England", "Inverness": "the Highlands",
}
HOBBIES = _words("""walking, gardening, reading, cycling, running, swimming, baking, fishing, knitting, photography,
    golf, yoga, birdwatching, choir singing, chess, pottery, rock climbing, sea kayaking, cold-water swimming,
    bell ringing, metal detecting, beekeeping, fell running, ballroom dancing, woodturning, orienteering,
    falconry, model railways, stargazing, amateur dramatics, bouldering, calligraphy, canoe polo, lacemaking,
    curling, geocaching, taxidermy, bonsai, Morris dancing, glassblowing""")
CONDITIONS = _words("""hypertension, asthma, type 2 diabetes, osteoarthritis, migraine, eczema, high cholesterol,
    hypothyroidism, irritable bowel syndrome, gout, psoriasis, atrial fibrillation, coeliac disease, sleep apnoea,
    glaucoma, Crohn's disease, fibromyalgia, endometriosis, rheumatoid arthritis, epilepsy, tinnitus, vitiligo,
    multiple sclerosis, sarcoidosis, Raynaud's phenomenon, lupus, haemochromatosis, myasthenia gravis,
    Meniere's disease, narcolepsy, Ehlers-Danlos syndrome, Addison's disease, hereditary angioedema, porphyria,
    Marfan syndrome, pemphigus, acromegaly, Wilson's disease, Behcet's disease, alkaptonuria""")
HABITS = _words("""night shifts, ex-smoker, vegetarian diet, daily smoker, regular alcohol use, vegan diet,
    lives alone, long commute, vaping, intermittent fasting, teetotal, keto diet, shift work, frequent flyer,
    carer for a parent, home working, lives on a boat, works away offshore, heavy coffee drinker,
    sleeps four hours a night, raw food diet, sea swimming before work, no car, lives off-grid, cycles to work,
    energy drink habit, sauna most days, wild camping, barefoot running, allotment holder, pipe smoker,
    snuff user, collects rainwater, sleeps outdoors in summer, fruitarian diet, dry January every year,
    night-time fishing, plays bingo twice a week, snooker league, breeds racing pigeons""")
# interleaved so that the Zipf weights by position mix the three kinds
KEYWORDS = tuple(k for trio in zip_longest(HOBBIES, CONDITIONS, HABITS) for k in trio if k)
KEYWORD_KIND = {**{k: "a hobby" for k in HOBBIES}, **{k: "a chronic condition" for k in CONDITIONS},
                **{k: "a lifestyle factor" for k in HABITS}}
YEARS = tuple(range(2004, 2024))
# event kind -> (template, generalised category, values)
EVENT_TEMPLATES = {
    "procedure": ("{value} in {year}", "an operation", _words("""hip replacement, knee replacement,
        cataract surgery, appendectomy, gallbladder removal, hernia repair, coronary stent, hysterectomy,
        spinal fusion, tonsillectomy, carpal tunnel release, bunion surgery, pacemaker fitting,
        shoulder reconstruction, kidney stone removal""")),
    "diagnosis": ("diagnosed with {value} in {year}", "a serious illness", _words("""breast cancer, prostate cancer,
        a stroke, a heart attack, sepsis, Lyme disease, a pulmonary embolism, meningitis, melanoma, long COVID,
        a brain aneurysm, Bell's palsy""")),
    "move": ("moved from {place} in {year}", "a move from elsewhere", _words("""Belfast, Swansea, Plymouth, Dundee,
        Liverpool, Birmingham, Dublin, Lagos, Karachi, Kraków, Gdańsk, Glasgow, Leeds, Cork, Aberdeen, Lisbon,
        Nairobi, Manila, Hull""")),
    "life": ("{value} in {year}", "a major life change", _words("""retired, was widowed, got divorced,
        became a grandparent, was made redundant, got married, started university, had a first child,
        emigrated back to the UK, left the armed forces""")),
    "injury": ("{value} in {year}", "an injury", _words("""fractured a wrist, broke an ankle, tore a knee ligament,
        suffered a concussion, dislocated a shoulder, broke several ribs, was injured in a car accident,
        was hurt in a cycling accident, fell from a ladder, had a serious dog bite""")),
}
EVENT_KINDS = tuple(EVENT_TEMPLATES)
# near-unique details: (template, generalised form); slots are filled from DETAIL_VALUES
DETAIL_TEMPLATES = (
    ("runs a {business} on {street}", "runs a small business"),
    ("has {family}", "has a large family"),
    ("volunteers at the {venue}", "does voluntary work locally"),
    ("owns {pet} called {name}", "has a pet"),
    ("plays the {instrument} in a {ensemble}", "plays music in a group"),
    ("coaches an under-{age} {sport} team", "coaches a youth sports team"),
    ("restores {project}", "has a mechanical hobby"),
    ("grew up on a {farm} farm in {county}", "grew up in the countryside"),
    ("keeps {animals} on an allotment off {street}", "keeps animals"),
    ("has swum across {water}", "does open-water challenges"),
    ("speaks {language} at home", "speaks another language at home"),
    ("collects {collection}", "is a keen collector"),
    ("appeared on the quiz show {show} in {year}", "has been on television"),
)
DETAIL_VALUES = {
    "business": _words("""bakery, café, crêperie, bicycle repair shop, tattoo studio, second-hand bookshop,
        fishmonger's, florist's, record shop, dog grooming parlour, barber's, deli, yarn shop, pie stall,
        launderette"""),
    "street": _words("""Mill Lane, Station Road, Harbour Street, Chapel Walk, Tanner's Row, Ropewalk Lane,
        Kiln Street, Orchard Close, Quarry Hill, Bishopsgate, Wharf Road, Foundry Lane, Cheapside, Saltmarket,
        Pudding Lane, Ferry Road"""),
    "county": _words("""Anglesey, Cumbria, Shetland, Orkney, Fife, Powys, Northumberland, Cornwall, Lincolnshire,
        the Fens, Shropshire, Argyll, Devon, the Yorkshire Dales"""),
    "family": _words("""twin daughters, twin sons, triplets, nine grandchildren, eleven siblings,
        adopted three brothers, a son who is an Olympic rower, a daughter in the Royal Navy, quadruplet nephews,
        a grandson who plays rugby for Wales, fostered forty children"""),
    "venue": _words("""lifeboat station, food bank, hospice shop, city farm, donkey sanctuary, railway museum,
        canal trust, mountain rescue base, hedgehog hospital, repair café, owl sanctuary, lighthouse museum,
        seal rescue centre, tramway museum"""),
    "pet": _words("""a greyhound, a Maine Coon, a bearded dragon, a border collie, an African grey parrot, a ferret,
        a Shetland pony, a dachshund, a tortoise, a Bengal cat, a corn snake, a lurcher"""),
    "name": _words("""Zoë, Chloë, Biscuit, Gandalf, Mr Darcy, Pickle, Bramble, Noodle, Captain, Winston, Pudding,
        Sable, Mabel, Kipper, Ziggy, Toffee, Rafferty, Bovril"""),
    "instrument": _words("""tuba, cornet, bagpipes, ukulele, harp, euphonium, fiddle, bassoon, accordion,
        steel drums, hurdy-gurdy, theremin"""),
    "ensemble": _words("""colliery brass band, ceilidh band, pub folk group, community orchestra, jazz trio,
        samba troupe, Salvation Army band, punk covers band"""),
    "age": tuple(str(n) for n in range(9, 17)),
    "sport": _words("netball, rugby league, hockey, water polo, shinty, lacrosse, cricket, judo"),
    "project": _words("""vintage Vespa scooters, narrowboats, classic Land Rovers, steam traction engines,
        grandfather clocks, old Singer sewing machines, pinball machines, Morris Minors, wooden sailing dinghies,
        pre-war motorcycles"""),
    "farm": _words("sheep, dairy, pig, potato, hill, goat, strawberry, trout"),
    "animals": _words("bees, quail, ferrets, rescue hens, pygmy goats, rabbits, racing pigeons, ducks"),
    "water": _words("""Lake Windermere, the Solent, Loch Ness, the Menai Strait, the English Channel,
        Coniston Water, the Firth of Forth, Loch Lomond"""),
    "language": _words("""Welsh, Scottish Gaelic, Polish, Urdu, Punjabi, Yoruba, Tagalog, Cantonese, Somali,
        Portuguese, Lithuanian, Bengali, Farsi, Swahili, Cornish"""),
    "collection": _words("""antique barometers, Victorian medicine bottles, vinyl records, vintage fountain pens,
        enamel badges, tin toys, fossils, beer mats, railway lamps, Toby jugs, match boxes,
        old maps of the county"""),
    "show": _words("Mastermind, Eggheads, Pointless, University Challenge, The Chase, Countdown"),
    "year": tuple(str(y) for y in YEARS),
}
# entity slots (what an NER tool finds) -> kind of tag
ENTITY_SLOTS = {"street": "place", "county": "place", "name": "name", "year": "year"}

SYMPTOMS = _words("""chest tightness, intermittent palpitations, a productive cough, lower back pain, fatigue,
    dizziness on standing, heartburn, headaches, breathlessness on exertion, joint stiffness, abdominal bloating,
    night sweats, numbness in the left hand, a persistent rash, weight loss, poor sleep, ankle swelling,
    blurred vision, urinary frequency, low mood""")
DURATIONS = _words("""three days, a week, ten days, two weeks, three weeks, a month, six weeks, two months,
    several months, a year""")
CLINICS = _words("""the respiratory clinic, the rapid-access chest pain clinic, the GP surgery,
    the emergency department, the rheumatology clinic, the acute medical unit, the Brontë Ward day unit,
    the minor injuries unit, the outpatient department""")
QUOTE_FILLER = '{Subj} described the symptoms as "{quote}", worse at night.'  # a comma and double quotes
# clinical filler: says nothing identifying; the negated and family mentions are bag-of-words noise
FILLER_TEMPLATES = (
    QUOTE_FILLER,
    "Observations were stable, with a blood pressure of {systolic}/{diastolic} and a heart rate of {pulse}.",
    "On examination {finding}.",
    "{test_result}.",
    "Further tests were arranged to exclude {other_condition}.",
    "{Subj} was started on {drug} and given written safety-netting advice.",
    "{Subj} was advised to keep a symptom diary and to return if things worsened.",
    "Follow-up was booked for {weeks} weeks' time, with a repeat blood test beforehand.",
    "There were no known drug allergies.",
    "The working diagnosis was {diagnosis}, and the plan was discussed with {subj_obj}.",
    "Symptoms had not responded to {drug} from the pharmacy.",
    "A referral to {service} was made, with an expected wait of {weeks} weeks.",
    "There was no history of {other_condition}.",
    "Family history includes {other_condition} in a parent and {procedure} in a sibling.",
    "{Subj} was last seen in this clinic in {year}, when {other_condition} was considered.",
)
# filler slots that name conditions, procedures or years the person does not have: at most
# MAX_DECOYS such sentences per document
DECOY_SLOTS = ("other_condition", "procedure", "year")
MAX_DECOYS = 1
FILLER_VALUES = {
    "systolic": tuple(str(n) for n in range(105, 165)), "diastolic": tuple(str(n) for n in range(60, 100)),
    "pulse": tuple(str(n) for n in range(52, 110)),
    "finding": _words("""the chest was clear, there was mild tenderness over the lumbar spine,
        the abdomen was soft and non-tender, heart sounds were normal with no murmur,
        there was a fine tremor of both hands, the joints were warm but not swollen,
        there was pitting oedema to the mid-shin, the throat was mildly inflamed"""),
    "test_result": _words("""A full blood count showed borderline anaemia, An ECG showed sinus rhythm,
        A chest X-ray showed no acute abnormality, An ultrasound scan showed a small effusion,
        Spirometry showed mild airflow obstruction, Blood tests showed a mildly raised CRP,
        Iron studies showed a low ferritin, A urine dipstick was negative"""),
    "drug": _words("""omeprazole, amlodipine, naproxen, a salbutamol inhaler, sertraline, co-codamol, metformin,
        a short course of prednisolone, an emollient cream, paracetamol"""),
    "diagnosis": _words("""a viral illness, musculoskeletal pain, reflux, an anxiety-related presentation,
        a flare of a long-term condition, a post-viral syndrome, a medication side effect"""),
    "quote": ("like a hot knife", "a dull ache, like toothache", "as if someone was sitting on me",
              "sharp, then gone", "a band, tightening", "pins and needles, all the time"),
    "service": _words("""physiotherapy, cardiology, the memory clinic, dietetics, talking therapies,
        the falls service, dermatology"""),
    "weeks": _words("2, 3, 4, 6, 8, 12"),
    "procedure": EVENT_TEMPLATES["procedure"][2],
    "year": DETAIL_VALUES["year"],
}


def _pick(rng: np.random.Generator, options, weights=None):
    """One element of ``options``; ``weights`` need not be normalised."""
    if weights is None:
        return options[int(rng.integers(len(options)))]
    p = np.asarray(weights, dtype=float)
    return options[int(rng.choice(len(options), p=p / p.sum()))]


def _zipf(n: int, exponent: float) -> np.ndarray:
    return 1.0 / np.arange(1, n + 1) ** exponent


def _fill(rng, template: str, values: dict) -> dict:
    """A random value for each ``{slot}`` of ``template`` found in ``values``, drawn in slot order."""
    slots = [name for _, name, _, _ in string.Formatter().parse(template) if name in values]
    return {slot: _pick(rng, values[slot]) for slot in slots}


def _a(noun: str) -> str:
    return f"{'an' if noun[0].lower() in 'aeiou' else 'a'} {noun}"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _make_person(rng, identity_id: str) -> dict:
    age_index = int(_pick(rng, range(len(AGE_BANDS)), AGE_WEIGHTS))
    keyword_p = _zipf(len(KEYWORDS), 0.9)
    chosen = rng.choice(len(KEYWORDS), int(rng.integers(3, 6)), replace=False, p=keyword_p / keyword_p.sum())
    events = []
    for k in sorted(int(i) for i in rng.choice(len(EVENT_KINDS), int(rng.integers(2, 4)), replace=False)):
        template, coarse, options = EVENT_TEMPLATES[EVENT_KINDS[k]]
        slot = "place" if "{place}" in template else "value"
        events.append({"template": template, "coarse": coarse, slot: _pick(rng, options),
                       "year": int(_pick(rng, YEARS))})
    details = []
    for t in rng.choice(len(DETAIL_TEMPLATES), int(rng.integers(1, 3)), replace=False):
        template, coarse = DETAIL_TEMPLATES[int(t)]
        details.append({"template": template, "coarse": coarse, "slots": _fill(rng, template, DETAIL_VALUES)})
    return {
        "identity_id": identity_id, "age_index": age_index,
        "age": int(AGE_BANDS[age_index][:2]) + int(rng.integers(0, 10)),
        "gender": _pick(rng, GENDERS, GENDER_WEIGHTS),
        "occupation": _pick(rng, tuple(OCCUPATIONS), _zipf(len(OCCUPATIONS), 0.8)),
        "city": _pick(rng, tuple(CITIES), _zipf(len(CITIES), 0.7)),
        "keywords": [KEYWORDS[i] for i in chosen], "events": events, "details": details,
    }


def _event_text(event: dict, mode: str = "keep", tags: dict | None = None) -> str:
    """An event, verbatim, generalised (category and decade) or masked (NER: year and place only)."""
    if mode == "coarsen":
        half = "early" if event["year"] % 10 < 5 else "late"
        return f"{event['coarse']} in the {half} {event['year'] // 10 * 10}s"
    if mode == "mask" and not tags:
        return REDACTED
    values = dict(event, **({"year": tags["year"], "place": tags["place"]} if mode == "mask" else {}))
    return event["template"].format(**values)


def _detail_text(detail: dict, mode: str = "keep", tags: dict | None = None) -> str:
    """A specific detail, verbatim, generalised, or masked (NER: its entity slots only)."""
    if mode == "coarsen":
        return detail["coarse"]
    if mode == "mask" and not tags:
        return REDACTED
    slots = {s: tags[ENTITY_SLOTS[s]] if mode == "mask" and s in ENTITY_SLOTS else v
             for s, v in detail["slots"].items()}
    return detail["template"].format(**slots)


def _profile_text(rng, person: dict) -> str:
    """The registry's free-text paragraph: 2-4 sentences, always with the specific details."""
    subj, pos = PRONOUNS[person["gender"]]
    subj = "this person" if subj == "the patient" else subj
    sentences = [f"{subj.capitalize()} is {_a(person['occupation'])} in {pos} "
                 f"{DECADE_WORDS[person['age_index']]} living in {person['city']}."]
    if rng.random() < 0.6:
        sentences.append(f"Notes mention {_join(person['keywords'][:2])}.")
    if rng.random() < 0.6:
        sentences.append(f"{pos.capitalize()} history includes {_event_text(person['events'][0])}.")
    sentences.append(f"{subj.capitalize()} {_join([_detail_text(d) for d in person['details']])}.")
    return " ".join(sentences)


def _registry_row(rng, person: dict) -> dict:
    return {"identity_id": person["identity_id"], "age_band": AGE_BANDS[person["age_index"]],
            "gender": person["gender"], "occupation": person["occupation"], "city": person["city"],
            "keywords": "; ".join(person["keywords"]), "events": "; ".join(map(_event_text, person["events"])),
            "profile": _profile_text(rng, person)}


def _opening(rng, person: dict, modes: dict, tags: dict) -> str:
    """'A 34-year-old woman from Leeds who works as a nurse was reviewed in ... with ...'."""
    pos = PRONOUNS[person["gender"]][1]
    noun, band = _pick(rng, GENDER_NOUNS[person["gender"]]), AGE_BANDS[person["age_index"]]
    age = {"keep": _pick(rng, (f"A {person['age']}-year-old {noun}", f"A {noun} aged {band}")),
           "coarsen": f"A {noun} in {pos} {DECADE_WORDS[person['age_index']]}",
           "mask": f"A {tags.get('age', REDACTED)}-year-old {noun}", "drop": f"A {noun}"}[modes["age"]]
    city = {"keep": f" from {person['city']}", "coarsen": f" living in a city in {CITIES[person['city']]}",
            "mask": f" from {tags.get('place', REDACTED)}", "drop": ""}[modes["city"]]
    job = {"keep": f" who works as {_a(person['occupation'])}",
           "coarsen": f" who works in {OCCUPATIONS[person['occupation']]}",
           "mask": f" who works as a {tags.get('occupation', REDACTED)}", "drop": ""}[modes["occupation"]]
    clinic, duration, symptom = _pick(rng, CLINICS), _pick(rng, DURATIONS), _pick(rng, SYMPTOMS)
    return f"{age}{city}{job} was reviewed in {clinic} with {duration} of {symptom}."


def _filler(rng, person: dict, template: str) -> str:
    """A clinical sentence; conditions it names are ones the person does not have."""
    subj = PRONOUNS[person["gender"]][0]
    others = tuple(c for c in CONDITIONS if c not in person["keywords"])
    values = _fill(rng, template, {**FILLER_VALUES, "other_condition": others})
    subj_obj = {"she": "her", "he": "him"}.get(subj, subj)
    return template.format(**values, Subj=subj.capitalize(), subj_obj=subj_obj)


def _item_modes(rng, person: dict, group: str) -> dict[str, list[str]]:
    """The release mode of each keyword, event and detail of one document (``drop``: not in the text).

    A case summary mentions only a few of the person's keywords, events and details (``MENTIONED``),
    and the release treats each mentioned item according to the group's policy. A release rarely
    removes every specific fact, though: unless the document is one of the well-protected ones
    (``PROTECTED_SHARE``), when no mentioned event is left verbatim one of them slips through verbatim
    with probability ``EVENT_SLIP``, and likewise a detail (``DETAIL_SLIP``).
    """
    policy, modes, mentioned = POLICIES[group], {}, {}
    for kind, (low, high) in MENTIONED.items():
        n_items = len(person[f"{kind}s"])
        chosen = rng.choice(n_items, min(n_items, int(rng.integers(low, high + 1))), replace=False)
        mentioned[kind] = sorted(int(i) for i in chosen)
        modes[kind] = ["drop"] * n_items
        for i in mentioned[kind]:
            modes[kind][i] = _pick(rng, MODES, policy[kind])
    if rng.random() < PROTECTED_SHARE[group]:
        return {kind: ["drop"] * len(items) for kind, items in modes.items()}
    for kind, slip in (("event", EVENT_SLIP[group]), ("detail", DETAIL_SLIP[group])):
        if mentioned[kind] and "keep" not in modes[kind] and rng.random() < slip:
            modes[kind][mentioned[kind][int(rng.integers(len(mentioned[kind])))]] = "keep"
    return modes


def _filler_templates(rng, n: int) -> list[str]:
    """``n`` distinct filler templates in random order, at most ``MAX_DECOYS`` of them decoys."""
    templates, n_decoys = [], 0
    for i in rng.permutation(len(FILLER_TEMPLATES)):
        template = FILLER_TEMPLATES[int(i)]
        if _is_decoy(template):
            if n_decoys == MAX_DECOYS:
                continue
            n_decoys += 1
        templates.append(template)
        if len(templates) == n:
            break
    return templates


def _is_decoy(template: str) -> bool:
    return any(f"{{{slot}}}" in template for slot in DECOY_SLOTS)


def _leaks(rng, person: dict, group: str, tags: dict) -> list[str]:
    """The sentences that carry keywords, events and details, as far as the release lets them."""
    subj = PRONOUNS[person["gender"]][0]
    modes = _item_modes(rng, person, group)
    sentences = []
    keywords = [kw if m == "keep" else KEYWORD_KIND[kw] for kw, m in zip(person["keywords"], modes["keyword"])
                if m != "drop"]
    if keywords:
        frame = _pick(rng, ("Social history notes {}.", "Relevant background includes {}.",
                            f"{subj.capitalize()} mentioned {{}} during the consultation."))
        sentences.append(frame.format(_join(keywords)))
    events = [_event_text(e, m, tags) for e, m in zip(person["events"], modes["event"]) if m != "drop"]
    if events:
        sentences.append(f"Relevant history: {_join(events)}.")
    for detail, m in zip(person["details"], modes["detail"]):
        if m != "drop":
            frame = _pick(rng, (f"{subj.capitalize()} {{}}.", f"Socially, {subj} {{}}.", f"Of note, {subj} {{}}."))
            sentences.append(frame.format(_detail_text(detail, m, tags)))
    return sentences


def _document_text(rng, person: dict, group: str, formatted: bool) -> str:
    """A 3-7 sentence case summary leaking the person's quasi-identifiers according to ``group``."""
    policy, tags = POLICIES[group], (NER_TAGS if group == "ner_masking" else {})
    modes = {field: _pick(rng, MODES, policy[field]) for field in ("age", "city", "occupation")}
    body = _leaks(rng, person, group, tags)
    n_filler = max(int(rng.integers(1, 5)), 2 - len(body))
    templates = _filler_templates(rng, n_filler)
    body += [_filler(rng, person, t) for t in templates if not (formatted and t == QUOTE_FILLER)]
    body = [body[i] for i in rng.permutation(len(body))][:6]
    if formatted:  # an edge case for CSV writers: a comma, a double quote and a newline
        body[-1] = _filler(rng, person, QUOTE_FILLER)
    text = " ".join([_opening(rng, person, modes, tags)] + body)
    return f"Clinic letter, {_pick(rng, CLINICS)}.\n{text}" if formatted else text


def _document_counts(rng, n_people: int, n_docs: int) -> np.ndarray:
    """Mostly 1-4 documents per person, none for some, summing exactly to ``n_docs``."""
    cap = max(MAX_DOCS_PER_PERSON, -(-n_docs // n_people))
    counts = rng.choice(5, size=n_people, p=[0.08, 0.17, 0.27, 0.25, 0.23])
    while (diff := n_docs - int(counts.sum())) != 0:
        eligible = np.flatnonzero(counts < cap) if diff > 0 else np.flatnonzero(counts > 0)
        counts[eligible[int(rng.integers(len(eligible)))]] += 1 if diff > 0 else -1
    return counts


def generate_sample_data(out_dir: str | Path, *, seed: int = 20261122, n_people: int = 400,
                         n_documents: int = 1000) -> dict[str, Path]:
    """Write ``registry.csv`` and ``documents.csv`` into ``out_dir``; return their paths by name.

    The same arguments always give byte-identical files.
    """
    if n_people < 1 or n_documents < 1:
        raise ValueError("n_people and n_documents must be positive")
    rng = np.random.default_rng(seed)
    people = [_make_person(rng, f"P{i:04d}") for i in range(1, n_people + 1)]
    registry = pd.DataFrame([_registry_row(rng, p) for p in people])

    n_open = round(OPEN_WORLD_SHARE * n_documents)
    outsiders = [_make_person(rng, f"X{i:04d}") for i in range(1, (n_open + 1) // 2 + 1)]
    counts = _document_counts(rng, n_people, n_documents - n_open)
    subjects = [p for p, c in zip(people, counts) for _ in range(c)]
    subjects += [outsiders[i % len(outsiders)] for i in range(n_open)]
    subjects = [subjects[i] for i in rng.permutation(len(subjects))]
    formatted = np.zeros(len(subjects), dtype=bool)
    formatted[rng.choice(len(subjects), max(1, len(subjects) // 50), replace=False)] = True
    rows = []
    for i, (person, fmt) in enumerate(zip(subjects, formatted), start=1):
        group = _pick(rng, GROUPS, GROUP_SHARES)
        rows.append({"doc_id": f"D{i:05d}", "text": _document_text(rng, person, group, bool(fmt)),
                     "identity_id": person["identity_id"], "group": group})
    documents = pd.DataFrame(rows, columns=["doc_id", "text", "identity_id", "group"])

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"registry": out / "registry.csv", "documents": out / "documents.csv"}
    for frame, path in ((registry, paths["registry"]), (documents, paths["documents"])):
        frame.to_csv(path, index=False, encoding="utf-8", lineterminator="\n")
    return paths


if __name__ == "__main__":  # python -m cpa_core.io.synthetic [OUT_DIR]
    import sys
    print(generate_sample_data(sys.argv[1] if len(sys.argv) > 1 else "sample_data"))
