"""A seeded generator of a fully synthetic demo dataset: a person registry and de-identified case notes.

Each synthetic person has quasi-identifiers of increasing specificity: coarse demographics (age band,
gender, occupation, city), Zipf-distributed keywords and dated life/medical events, and one or two
near-unique details in a free-text profile. Each document is a short clinical case summary about one
person, released through one of three mechanisms (``group``) that leak each quasi-identifier with
different probabilities: kept verbatim, coarsened ("a city in Scotland"), masked ("[LOCATION]") or
dropped. About 3% of documents are about people absent from the registry (ids ``X0001``...).

Everything is drawn from ``numpy.random.default_rng(seed)`` in a fixed order, so a seed always gives
byte-identical files. No real person is described.
"""

from __future__ import annotations

import string
from itertools import zip_longest
from pathlib import Path

import numpy as np
import pandas as pd

GROUPS = ("manual_redaction", "ner_masking", "generalisation")
GROUP_SHARES = (0.34, 0.33, 0.33)
OPEN_WORLD_SHARE = 0.03
MAX_DOCS_PER_PERSON = 4
MODES = ("keep", "coarsen", "mask", "drop")
# probability of each mode in MODES, per release mechanism and quasi-identifier
POLICIES = {
    "manual_redaction": {"age": (.10, 0, .50, .40), "occupation": (.10, 0, .40, .50),
                         "city": (.05, 0, .50, .45), "keyword": (.15, 0, 0, .85),
                         "event": (.05, 0, .30, .65), "detail": (.25, 0, .30, .45)},
    "ner_masking": {"age": (.55, .05, .20, .20), "occupation": (.50, 0, .20, .30),
                    "city": (.25, 0, .50, .25), "keyword": (.30, 0, 0, .70),
                    "event": (.15, 0, .45, .40), "detail": (.45, 0, .30, .25)},
    "generalisation": {"age": (.10, .60, 0, .30), "occupation": (.10, .50, 0, .40),
                       "city": (.05, .60, 0, .35), "keyword": (.20, .35, 0, .45),
                       "event": (.05, .55, 0, .40), "detail": (.30, .40, 0, .30)},
}
MASK_TAGS = {"manual_redaction": {}, "ner_masking": {"age": "[AGE]", "occupation": "[OCCUPATION]",
             "place": "[LOCATION]", "name": "[NAME]", "year": "[DATE]"}}

AGE_BANDS = ("18-29", "30-39", "40-49", "50-59", "60-69", "70-79", "80-89")
AGE_WEIGHTS = (0.14, 0.16, 0.17, 0.18, 0.16, 0.12, 0.07)
DECADE_WORDS = ("twenties", "thirties", "forties", "fifties", "sixties", "seventies", "eighties")
GENDERS = ("female", "male", "non-binary")
GENDER_WEIGHTS = (0.50, 0.48, 0.02)
PRONOUNS = {"female": ("she", "her"), "male": ("he", "his"), "non-binary": ("the patient", "their")}
GENDER_NOUNS = {"female": ("woman", "female patient", "female"), "male": ("man", "male patient", "male"),
                "non-binary": ("patient", "non-binary patient", "person")}
# occupation -> sector, in decreasing frequency
OCCUPATIONS = {
    "nurse": "healthcare", "teacher": "education", "retail assistant": "retail",
    "care worker": "social care", "office administrator": "administration", "bus driver": "transport",
    "electrician": "the building trades", "accountant": "finance", "chef": "hospitality",
    "software developer": "technology", "police officer": "the public services", "plumber": "the building trades",
    "hairdresser": "personal services", "pharmacist": "healthcare", "farmer": "agriculture",
    "solicitor": "the legal sector", "architect": "construction", "postal worker": "logistics",
    "librarian": "the public sector", "firefighter": "the emergency services", "dentist": "healthcare",
    "civil engineer": "engineering", "journalist": "the media", "veterinary surgeon": "animal care",
    "airline pilot": "aviation",
}
# city -> region, in decreasing frequency
CITIES = {
    "Manchester": "the north of England", "Leeds": "the north of England", "Glasgow": "Scotland",
    "Bristol": "the south-west", "Sheffield": "the north of England", "Cardiff": "Wales",
    "Edinburgh": "Scotland", "Newcastle": "the north-east", "Norwich": "the east of England",
    "Exeter": "the south-west", "York": "the north of England", "Inverness": "the Highlands",
}
HOBBIES = ("walking", "gardening", "reading", "cycling", "running", "swimming", "baking", "fishing", "knitting",
           "photography", "golf", "yoga", "birdwatching", "choir singing", "chess", "pottery", "rock climbing",
           "sea kayaking", "cold-water swimming", "bell ringing", "metal detecting", "beekeeping", "fell running",
           "ballroom dancing", "woodturning", "orienteering", "falconry", "model railways", "stargazing",
           "amateur dramatics", "bouldering", "calligraphy", "canoe polo", "lacemaking", "curling",
           "geocaching", "taxidermy", "bonsai", "Morris dancing", "glassblowing")
CONDITIONS = ("hypertension", "asthma", "type 2 diabetes", "osteoarthritis", "migraine", "eczema",
              "high cholesterol", "hypothyroidism", "irritable bowel syndrome", "gout", "psoriasis",
              "atrial fibrillation", "coeliac disease", "sleep apnoea", "glaucoma", "Crohn's disease",
              "fibromyalgia", "endometriosis", "rheumatoid arthritis", "epilepsy", "tinnitus", "vitiligo",
              "multiple sclerosis", "sarcoidosis", "Raynaud's phenomenon", "lupus", "haemochromatosis",
              "myasthenia gravis", "Meniere's disease", "narcolepsy", "Ehlers-Danlos syndrome",
              "Addison's disease", "hereditary angioedema", "porphyria", "Marfan syndrome",
              "pemphigus", "acromegaly", "Wilson's disease", "Behcet's disease", "alkaptonuria")
HABITS = ("night shifts", "ex-smoker", "vegetarian diet", "daily smoker", "regular alcohol use", "vegan diet",
          "lives alone", "long commute", "vaping", "intermittent fasting", "teetotal", "keto diet",
          "shift work", "frequent flyer", "carer for a parent", "home working", "lives on a boat",
          "works away offshore", "heavy coffee drinker", "sleeps four hours a night", "raw food diet",
          "sea swimming before work", "no car", "lives off-grid", "cycles to work", "energy drink habit",
          "sauna most days", "wild camping", "barefoot running", "allotment holder", "pipe smoker",
          "snuff user", "collects rainwater", "sleeps outdoors in summer", "fruitarian diet",
          "dry January every year", "night-time fishing", "plays bingo twice a week", "snooker league",
          "breeds racing pigeons")
KEYWORDS = tuple(k for trio in zip_longest(HOBBIES, CONDITIONS, HABITS) for k in trio if k)
KEYWORD_KIND = {**{k: "a hobby" for k in HOBBIES}, **{k: "a chronic condition" for k in CONDITIONS},
                **{k: "a lifestyle factor" for k in HABITS}}
EVENT_TEMPLATES = {
    "procedure": ("{value} in {year}", "an operation", ("hip replacement", "knee replacement", "cataract surgery",
                  "appendectomy", "gallbladder removal", "hernia repair", "coronary stent", "hysterectomy",
                  "spinal fusion", "tonsillectomy", "carpal tunnel release", "bunion surgery",
                  "pacemaker fitting", "shoulder reconstruction", "kidney stone removal")),
    "diagnosis": ("diagnosed with {value} in {year}", "a serious illness", ("breast cancer", "prostate cancer", "a stroke",
                  "a heart attack", "sepsis", "Lyme disease", "a pulmonary embolism", "meningitis",
                  "melanoma", "long COVID", "a brain aneurysm", "Bell's palsy")),
    "move": ("moved from {place} in {year}", "a move from elsewhere", ("Belfast", "Swansea", "Plymouth", "Dundee", "Liverpool",
             "Birmingham", "Dublin", "Lagos", "Karachi", "Kraków", "Gdańsk", "Glasgow", "Leeds", "Cork",
             "Aberdeen", "Lisbon", "Nairobi", "Manila", "Bradford", "Hull")),
    "life": ("{value} in {year}", "a major life change", ("retired", "was widowed", "got divorced", "became a grandparent",
             "was made redundant", "got married", "started university", "had a first child",
             "emigrated back to the UK", "left the armed forces")),
    "injury": ("{value} in {year}", "an injury", ("fractured a wrist", "broke an ankle", "tore a knee ligament",
               "suffered a concussion", "dislocated a shoulder", "broke several ribs",
               "was injured in a car accident", "was hurt in a cycling accident", "fell from a ladder",
               "had a serious dog bite")),
}
EVENT_KINDS = tuple(EVENT_TEMPLATES)
YEARS = tuple(range(2004, 2024))
# near-unique details: (template, coarse version); slot values below, place/name slots are entities
DETAIL_TEMPLATES = (
    ("runs a {business} on {place}", "runs a small business"),
    ("has {family}", "has a large family"),
    ("volunteers at the {venue}", "does voluntary work locally"),
    ("owns a {breed} called {name}", "has a pet"),
    ("plays the {instrument} in a {ensemble}", "plays music in a group"),
    ("coaches an under-{age} {sport} team", "coaches a youth sports team"),
    ("restores {vehicle}", "has a mechanical hobby"),
    ("grew up on a {farm} farm in {place}", "grew up in the countryside"),
    ("keeps {animals} on an allotment near {place}", "keeps animals"),
    ("has swum across {water}", "does open-water challenges"),
    ("speaks {language} at home", "speaks another language at home"),
    ("collects {collection}", "is a keen collector"),
    ("appeared on the quiz show {show} in {year}", "has been on television"),
)
DETAIL_VALUES = {
    "business": ("bakery", "café", "crêperie", "bicycle repair shop", "tattoo studio", "second-hand bookshop",
                 "fishmonger's", "florist's", "record shop", "dog grooming parlour", "barber's", "deli",
                 "yarn shop", "pie stall", "launderette"),
    "place": ("Mill Lane", "Station Road", "Harbour Street", "Chapel Walk", "Tanner's Row", "Ropewalk Lane",
              "Kiln Street", "Orchard Close", "Quarry Hill", "Bishopsgate", "Wharf Road", "Foundry Lane",
              "Cheapside", "Saltmarket", "Pudding Lane", "Ferry Road", "Anglesey", "Cumbria", "Shetland",
              "Orkney", "Fife", "Powys", "Northumberland", "Cornwall", "Lincolnshire", "the Fens"),
    "family": ("twin daughters", "twin sons", "triplets", "nine grandchildren", "eleven siblings",
               "adopted three brothers", "a son who is an Olympic rower", "a daughter in the Royal Navy",
               "quadruplet nephews", "a twin brother who is also a patient here", "fostered forty children"),
    "venue": ("lifeboat station", "food bank", "hospice shop", "city farm", "donkey sanctuary",
              "railway museum", "canal trust", "mountain rescue base", "hedgehog hospital", "repair café",
              "owl sanctuary", "lighthouse museum", "seal rescue centre", "tramway museum"),
    "breed": ("greyhound", "Maine Coon", "bearded dragon", "border collie", "African grey parrot", "ferret",
              "Shetland pony", "dachshund", "tortoise", "Bengal cat", "corn snake", "lurcher"),
    "name": ("Zoë", "Chloë", "Biscuit", "Gandalf", "Mr Darcy", "Pickle", "Bramble", "Noodle", "Captain",
             "Winston", "Pudding", "Sable", "Mabel", "Kipper", "Ziggy", "Toffee", "Rafferty", "Bovril"),
    "instrument": ("tuba", "cornet", "bagpipes", "ukulele", "harp", "euphonium", "fiddle", "bassoon",
                   "accordion", "steel drums", "hurdy-gurdy", "theremin"),
    "ensemble": ("colliery brass band", "ceilidh band", "pub folk group", "community orchestra",
                 "jazz trio", "samba troupe", "Salvation Army band", "punk covers band"),
    "age": tuple(str(n) for n in range(9, 17)),
    "sport": ("netball", "rugby league", "hockey", "water polo", "shinty", "lacrosse", "cricket", "judo"),
    "vehicle": ("vintage Vespa scooters", "narrowboats", "classic Land Rovers", "steam traction engines",
                "grandfather clocks", "old Singer sewing machines", "pinball machines", "Morris Minors",
                "wooden sailing dinghies", "pre-war motorcycles"),
    "farm": ("sheep", "dairy", "pig", "potato", "hill", "goat", "strawberry", "trout"),
    "animals": ("bees", "quail", "ferrets", "rescue hens", "pygmy goats", "rabbits", "racing pigeons", "ducks"),
    "water": ("Lake Windermere", "the Solent", "Loch Ness", "the Menai Strait", "the English Channel",
              "Coniston Water", "the Firth of Forth", "Loch Lomond"),
    "language": ("Welsh", "Scottish Gaelic", "Polish", "Urdu", "Punjabi", "Yoruba", "Tagalog", "Cantonese",
                 "Somali", "Portuguese", "Lithuanian", "Bengali", "Farsi", "Swahili", "Cornish"),
    "collection": ("antique barometers", "Victorian medicine bottles", "vinyl records", "vintage fountain pens",
                   "enamel badges", "tin toys", "fossils", "beer mats", "railway lamps", "Toby jugs",
                   "match boxes", "old maps of the county"),
    "show": ("Mastermind", "Eggheads", "Pointless", "University Challenge", "The Chase", "Countdown"),
    "year": tuple(str(y) for y in YEARS),
}
ENTITY_SLOTS = {"place": "place", "name": "name", "year": "year"}

SYMPTOMS = ("chest tightness", "intermittent palpitations", "a productive cough", "lower back pain",
            "fatigue", "dizziness on standing", "heartburn", "headaches", "breathlessness on exertion",
            "joint stiffness", "abdominal bloating", "night sweats", "numbness in the left hand",
            "a persistent rash", "weight loss", "poor sleep", "ankle swelling", "blurred vision",
            "urinary frequency", "low mood")
DURATIONS = ("three days", "a week", "ten days", "two weeks", "three weeks", "a month", "six weeks",
             "two months", "several months", "a year")
CLINICS = ("the respiratory clinic", "the rapid-access chest pain clinic", "the GP surgery",
           "the emergency department", "the rheumatology clinic", "the acute medical unit",
           "the Brontë Ward day unit", "the minor injuries unit", "the outpatient department")
FILLER_TEMPLATES = (
    "Observations were stable, with a blood pressure of {bp}/{dia} and a heart rate of {hr}.",
    "On examination {finding}.",
    "{test} showed {result}.",
    "{test} was arranged to exclude {condition}.",
    "{Subj} was started on {drug} and given written safety-netting advice.",
    "{Subj} was advised to keep a symptom diary and to return if things worsened.",
    "Follow-up was booked for {weeks} weeks' time, with a repeat blood test beforehand.",
    "There was no relevant family history and no known drug allergies.",
    "The working diagnosis was {diagnosis}, and the plan was discussed with {subj_obj}.",
    "{Subj} described the pain as \"{quote}\", worse at night.",
    "Symptoms had not responded to {drug} from the pharmacy.",
    "A referral to {service} was made, with an expected wait of {weeks} weeks.",
    "There was no history of {condition} or {other_condition}.",
    "Family history includes {other_condition} and a {procedure} in a parent.",
    "{Subj} was last seen in this clinic in {year}, when {other_condition} was considered.",
    "{Subj} denied any {hobby_risk}-related injury.",
)
FILLER_VALUES = {
    "finding": ("the chest was clear", "there was mild tenderness over the lumbar spine",
                "the abdomen was soft and non-tender", "heart sounds were normal with no murmur",
                "there was a fine tremor of both hands", "the joints were warm but not swollen",
                "there was pitting oedema to the mid-shin", "the throat was mildly inflamed"),
    "test": ("A full blood count", "An ECG", "A chest X-ray", "An ultrasound scan", "Spirometry",
             "A CT scan", "Thyroid function testing", "A urine dipstick"),
    "result": ("no acute abnormality", "a mildly raised CRP", "borderline anaemia", "sinus rhythm",
               "a small effusion", "results within the normal range", "a low ferritin"),
    "condition": CONDITIONS[:15] + ("a fracture", "infection", "a clot"),
    "drug": ("omeprazole", "amlodipine", "naproxen", "a salbutamol inhaler", "sertraline", "co-codamol",
             "metformin", "a short course of prednisolone", "an emollient cream", "paracetamol"),
    "diagnosis": ("a viral illness", "musculoskeletal pain", "reflux", "an anxiety-related presentation",
                  "a flare of a long-term condition", "a post-viral syndrome", "a medication side effect"),
    "quote": ("like a hot knife", "a dull ache, like toothache", "as if someone was sitting on me",
              "sharp, then gone", "a band, tightening", "pins and needles, all the time"),
    "service": ("physiotherapy", "cardiology", "the memory clinic", "dietetics", "talking therapies",
                "the falls service", "dermatology"),
    "weeks": tuple(str(n) for n in (2, 3, 4, 6, 8, 12)),
    "other_condition": CONDITIONS,  # negated or family mentions: bag-of-words noise
    "procedure": EVENT_TEMPLATES["procedure"][2],
    "year": tuple(str(y) for y in YEARS),
    "hobby_risk": HOBBIES,
}


def _pick(rng: np.random.Generator, options, weights=None):
    """One element of ``options``; ``weights`` need not be normalised."""
    if weights is None:
        return options[int(rng.integers(len(options)))]
    p = np.asarray(weights, dtype=float)
    return options[int(rng.choice(len(options), p=p / p.sum()))]


def _zipf(n: int, exponent: float = 1.0) -> np.ndarray:
    return 1.0 / np.arange(1, n + 1) ** exponent


def _fill(rng, template: str, values: dict) -> dict:
    """A random value for every ``{slot}`` of ``template``, drawn in slot order."""
    slots = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    return {slot: _pick(rng, values[slot]) for slot in slots}


def _make_person(rng, identity_id: str) -> dict:
    age_i = int(rng.choice(len(AGE_BANDS), p=np.array(AGE_WEIGHTS) / sum(AGE_WEIGHTS)))
    low = int(AGE_BANDS[age_i].split("-")[0])
    occupations, cities = tuple(OCCUPATIONS), tuple(CITIES)
    n_kw = int(rng.integers(3, 6))
    kw_p = _zipf(len(KEYWORDS), 0.9)
    keywords = [KEYWORDS[i] for i in rng.choice(len(KEYWORDS), n_kw, replace=False, p=kw_p / kw_p.sum())]
    kinds = rng.choice(len(EVENT_KINDS), int(rng.integers(2, 4)), replace=False)
    events = []
    for k in sorted(int(i) for i in kinds):
        kind = EVENT_KINDS[k]
        template, coarse, options = EVENT_TEMPLATES[kind]
        slot = "place" if kind == "move" else "value"
        events.append({"template": template, "coarse": coarse, slot: _pick(rng, options),
                       "year": int(_pick(rng, YEARS))})
    details = []
    for t in rng.choice(len(DETAIL_TEMPLATES), int(rng.integers(1, 3)), replace=False):
        template, coarse = DETAIL_TEMPLATES[int(t)]
        details.append({"template": template, "coarse": coarse, "slots": _fill(rng, template, DETAIL_VALUES)})
    return {
        "identity_id": identity_id, "age_index": age_i, "age": low + int(rng.integers(0, 10)),
        "gender": _pick(rng, GENDERS, GENDER_WEIGHTS),
        "occupation": _pick(rng, occupations, _zipf(len(occupations), 0.8)),
        "city": _pick(rng, cities, _zipf(len(cities), 0.7)),
        "keywords": keywords, "events": events, "details": details,
    }


def _event_text(event: dict, mode: str = "keep", tags: dict | None = None) -> str:
    """An event phrase: verbatim, coarsened (category and decade), or masked.

    NER masking (``tags``) replaces the year and place only; a human redactor blacks out the whole event.
    """
    if mode == "coarsen":
        return f"{event['coarse']} in the {'early' if event['year'] % 10 < 5 else 'late'} {event['year'] // 10 * 10}s"
    if mode == "mask" and not tags:
        return "[REDACTED]"
    values = dict(event)
    if mode == "mask":
        values.update(year=tags["year"], place=tags["place"])
    return event["template"].format(**values)


def _detail_text(detail: dict, mode: str = "keep", tags: dict | None = None) -> str:
    if mode == "coarsen":
        return detail["coarse"]
    slots = dict(detail["slots"])
    if mode == "mask" and not tags:  # a human redactor blacks out the whole phrase
        return "[REDACTED]"
    if mode == "mask":
        for slot in slots:
            if slot in ENTITY_SLOTS:
                slots[slot] = tags[ENTITY_SLOTS[slot]]
    return detail["template"].format(**slots)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _profile_text(rng, person: dict) -> str:
    """The registry's free-text paragraph: 2-4 sentences, always with the specific details."""
    subj, pos = PRONOUNS[person["gender"]]
    decade = DECADE_WORDS[person["age_index"]]
    sentences = [f"{subj.capitalize()} is a {person['occupation']} in {pos} {decade} living in {person['city']}."]
    if rng.random() < 0.6:
        sentences.append(f"Notes mention {_join(person['keywords'][:2])}.")
    if rng.random() < 0.6:
        sentences.append(f"{pos.capitalize()} history includes {_event_text(person['events'][0])}.")
    sentences.append(f"{subj.capitalize()} {_join([_detail_text(d) for d in person['details']])}.")
    return " ".join(sentences)


def _registry_row(rng, person: dict) -> dict:
    return {
        "identity_id": person["identity_id"], "age_band": AGE_BANDS[person["age_index"]],
        "gender": person["gender"], "occupation": person["occupation"], "city": person["city"],
        "keywords": "; ".join(person["keywords"]),
        "events": "; ".join(_event_text(e) for e in person["events"]),
        "profile": _profile_text(rng, person),
    }


def _opening(rng, person: dict, group: str, modes: dict, tags: dict) -> str:
    """'A 34-year-old woman from Leeds who works as a nurse was reviewed in ... with ...'."""
    subj, pos = PRONOUNS[person["gender"]]
    noun = _pick(rng, GENDER_NOUNS[person["gender"]])
    age = {"keep": _pick(rng, (f"A {person['age']}-year-old {noun}",
                               f"A {noun} aged {AGE_BANDS[person['age_index']]}")),
           "coarsen": f"A {noun} in {pos} {DECADE_WORDS[person['age_index']]}",
           "mask": f"A {tags.get('age', '[REDACTED]')}-year-old {noun}", "drop": f"A {noun}"}[modes["age"]]
    city = {"keep": f" from {person['city']}", "coarsen": f" living in a city in {CITIES[person['city']]}",
            "mask": f" from {tags.get('place', '[REDACTED]')}", "drop": ""}[modes["city"]]
    occupation = {"keep": f" who works as a {person['occupation']}",
                  "coarsen": f" who works in {OCCUPATIONS[person['occupation']]}",
                  "mask": f" who works as a {tags.get('occupation', '[REDACTED]')}", "drop": ""}[modes["occupation"]]
    return (f"{age}{city}{occupation} was reviewed in {_pick(rng, CLINICS)} with "
            f"{_pick(rng, DURATIONS)} of {_pick(rng, SYMPTOMS)}.")


def _filler(rng, person: dict, template: str | None = None) -> str:
    subj, _ = PRONOUNS[person["gender"]]
    template = template or _pick(rng, FILLER_TEMPLATES)
    values = {"bp": int(rng.integers(105, 165)), "dia": int(rng.integers(60, 100)), "hr": int(rng.integers(52, 110))}
    values.update({k: _pick(rng, FILLER_VALUES[k]) for k in FILLER_VALUES})
    values.update(Subj=subj.capitalize(), subj_obj={"she": "her", "he": "him"}.get(subj, "the patient"))
    return template.format(**values)


def _document_text(rng, person: dict, group: str, formatted: bool) -> str:
    """A 3-7 sentence case summary leaking the person's quasi-identifiers according to ``group``."""
    policy, tags = POLICIES[group], MASK_TAGS.get(group, {})
    mode = {field: _pick(rng, MODES, policy[field]) for field in ("age", "city", "occupation")}
    subj = PRONOUNS[person["gender"]][0].capitalize()
    extra = []
    keywords = []
    for kw in person["keywords"]:
        m = _pick(rng, MODES, policy["keyword"])
        if m != "drop":
            keywords.append(kw if m == "keep" else KEYWORD_KIND[kw])
    if keywords:
        extra.append(_pick(rng, ("Social history notes {}.", "Relevant background includes {}.",
                                 f"{subj} mentioned {{}} during the consultation.")).format(_join(keywords)))
    events = [_event_text(e, m, tags) for e in person["events"]
              if (m := _pick(rng, MODES, policy["event"])) != "drop"]
    if events:
        extra.append(f"Relevant history: {_join(events)}.")
    for d in person["details"]:
        m = _pick(rng, MODES, policy["detail"])
        if m != "drop":
            extra.append(_pick(rng, (f"{subj} {{}}.", f"Socially, {subj.lower()} {{}}.",
                                     f"Of note, {subj.lower()} {{}}.")).format(_detail_text(d, m, tags)))
    n_filler = max(int(rng.integers(1, 5)), 2 - len(extra))
    body = extra + [_filler(rng, person) for _ in range(n_filler)]
    body = [body[i] for i in rng.permutation(len(body))][:6]
    if formatted:  # an edge case for CSV writers: a comma, a double quote and a newline
        body[-1] = _filler(rng, person, FILLER_TEMPLATES[9])
    text = " ".join([_opening(rng, person, group, mode, tags)] + body)
    return f"Clinic letter, {_pick(rng, CLINICS)}.\n{text}" if formatted else text


def _document_counts(rng, n_people: int, n_docs: int) -> np.ndarray:
    """1-4 documents for most people, none for some, summing exactly to ``n_docs``."""
    cap = max(MAX_DOCS_PER_PERSON, -(-n_docs // max(n_people, 1)))
    counts = rng.choice(5, size=n_people, p=[0.08, 0.17, 0.27, 0.25, 0.23])
    while (diff := n_docs - int(counts.sum())) != 0:
        eligible = np.flatnonzero(counts < cap) if diff > 0 else np.flatnonzero(counts > 0)
        counts[eligible[int(rng.integers(len(eligible)))]] += 1 if diff > 0 else -1
    return counts


def generate_sample_data(out_dir: str | Path, *, seed: int = 20261122, n_people: int = 400,
                         n_documents: int = 1000) -> dict[str, Path]:
    """Write ``registry.csv`` and ``documents.csv`` into ``out_dir``; return their paths by name."""
    if n_people < 1 or n_documents < 1:
        raise ValueError("n_people and n_documents must be positive")
    rng = np.random.default_rng(seed)
    people = [_make_person(rng, f"P{i:04d}") for i in range(1, n_people + 1)]
    registry = pd.DataFrame([_registry_row(rng, p) for p in people])

    n_open = max(1, round(OPEN_WORLD_SHARE * n_documents)) if n_documents > 1 else 0
    outsiders = [_make_person(rng, f"X{i:04d}") for i in range(1, -(-n_open // 2) + 1)]
    subjects = [p for p, c in zip(people, _document_counts(rng, n_people, n_documents - n_open)) for _ in range(c)]
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
    registry.to_csv(paths["registry"], index=False, encoding="utf-8", lineterminator="\n")
    documents.to_csv(paths["documents"], index=False, encoding="utf-8", lineterminator="\n")
    return paths


if __name__ == "__main__":  # python -m cpa_core.synthetic OUT_DIR
    import sys
    print(generate_sample_data(sys.argv[1] if len(sys.argv) > 1 else "sample_data"))
