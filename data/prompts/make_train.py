"""Write train.jsonl: about 300 prompts for self-distillation of drafters.

Deterministic (a fixed seed, no dates, no network): running it again gives the same file,
byte for byte. Usage: ``python data/prompts/make_train.py [OUTPUT]`` (default: beside this
script). The texts are written for speclab; see README.md for the licence.
"""

import json
import random
import sys
from fractions import Fraction
from pathlib import Path

FIRST_ID = 1001
SEED = 1729

# --- passages: each one serves three summaries and three questions ------------------------
PASSAGES = [
    ("""Community gardens turn empty plots of land into shared growing spaces. Members usually rent a small bed for a modest yearly fee and agree to keep it tidy, while tools, water and a compost area are shared. Many gardens also have a common area where volunteers grow herbs and fruit for anyone to pick. Beyond fresh vegetables, gardeners often mention the social side: people of different ages and backgrounds meet regularly, swap seeds and advice, and keep an eye on each other's plants during holidays. Schools sometimes use a bed to teach children where food comes from. The main challenges are finding land that can be used for several years, paying for water, and keeping enough volunteers involved when the first enthusiasm fades.""",
     ["What do members usually get for their yearly fee?", "What challenges do community gardens face?", "How do schools use community gardens?"]),
    ("""A refrigerator does not create cold; it moves heat from the inside of the cabinet to the room outside. It does this with a fluid called a refrigerant that circulates through a closed loop of pipes. Inside the fridge, the refrigerant passes through the evaporator, where it boils at a low temperature and absorbs heat from the food compartment. A compressor then squeezes the vapour, which raises its temperature and pressure. The hot vapour flows through the condenser coils, usually at the back or bottom of the fridge, where it gives off heat to the kitchen and turns back into a liquid. Finally, the liquid passes through a narrow expansion valve, its pressure drops, and it returns to the evaporator to start again. This is why the back of a fridge feels warm.""",
     ["Where does the refrigerant absorb heat?", "What does the compressor do?", "Why does the back of a fridge feel warm?"]),
    ("""Greenlake Swimming Pool will reopen on Monday 3 March after a six-week refurbishment. The main pool has new tiles and lighting, and the changing rooms have been rebuilt with more family cubicles and lockers that take a coin or a card. The learner pool will stay closed until the end of March while its heating system is replaced, so children's lessons will take place in the shallow end of the main pool during this time. Public swimming sessions run from 7 am to 9 pm on weekdays and from 8 am to 6 pm at weekends. Lane swimming is available before 9 am and after 6 pm on weekdays. Prices are unchanged, and memberships that were paused during the closure will restart automatically on 3 March.""",
     ["When does the pool reopen?", "Where will children's lessons take place in March, and why?", "What happens to memberships that were paused?"]),
    ("""Before 1840, letters in Britain were usually paid for by the person who received them, and the price depended on the distance travelled and the number of sheets of paper. The charges were high and complicated, and many people refused to pay. The reformer Rowland Hill argued that a low, uniform rate paid in advance by the sender would be simpler and would encourage people to send more letters. His proposal led to the Penny Black, the first adhesive postage stamp, which went on sale in May 1840. It allowed a letter of up to half an ounce to travel anywhere in the country for one penny. The number of letters sent rose sharply, and within a few decades many other countries had introduced stamps of their own.""",
     ["Who paid for letters before 1840?", "What did Rowland Hill propose?", "What could be sent for one penny with a Penny Black?"]),
    ("""News from the Ferris Street Cafe: this spring we are changing our opening hours. From April we will open at 7.30 am on weekdays, half an hour earlier than before, so that commuters can pick up a coffee on the way to the station. We will close at 4 pm instead of 5 pm, because the last hour has been very quiet. Weekend hours stay the same, 9 am to 3 pm. Our new seasonal menu includes a pea and mint soup, a spinach and feta pie, and rhubarb crumble cake. We have also switched to a local dairy for all our milk. Finally, bring your own cup and you will get 20 pence off any hot drink. Thank you to everyone who filled in our survey last month.""",
     ["What are the new weekday opening hours?", "Why is the cafe closing earlier?", "How can customers get a discount on hot drinks?"]),
    ("""Leaves are green in summer because they are full of chlorophyll, the pigment that plants use to capture light for photosynthesis. Chlorophyll is constantly broken down and replaced while the days are long. In autumn, as days shorten and nights get cooler, many trees stop making new chlorophyll and begin to recover useful nutrients from their leaves before dropping them. As the green fades, yellow and orange pigments called carotenoids, which were present all along, become visible. Some trees also produce new red and purple pigments, called anthocyanins, in autumn. Bright, sunny days followed by cool but not freezing nights tend to give the strongest reds. A dry summer or an early frost can make the colours dull or cause leaves to fall early.""",
     ["Why are leaves green in summer?", "Where do the yellow and orange colours come from?", "What weather gives the strongest red colours?"]),
    ("""Hillcrest Library offers free Wi-Fi to all visitors. To connect, choose the network called Hillcrest-Public and accept the terms on the welcome page; no password is needed. Each session lasts three hours, after which you can reconnect straight away. Library members can also use the six public computers for up to two hours a day, booked at the front desk or online with their card number. Printing costs 10 pence per black-and-white page and 40 pence per colour page, paid at the desk. The network blocks websites with illegal or adult content, and downloading large files such as films may be slowed at busy times. For safety, staff recommend that visitors do not carry out online banking on any public network.""",
     ["How do I connect to the library Wi-Fi?", "How much does colour printing cost?", "How long can members use the public computers each day?"]),
    ("""Tides are the regular rise and fall of the sea, and they are caused mainly by the pull of the Moon's gravity. The Moon pulls hardest on the side of the Earth closest to it, so the ocean there bulges towards the Moon. On the opposite side, the Moon's pull is weakest, and a second bulge forms there. As the Earth turns, most coasts pass through both bulges each day, which is why many places have two high tides and two low tides roughly every 24 hours and 50 minutes. The Sun also affects the tides, though less strongly. When the Sun and Moon line up, at new moon and full moon, their effects add together and give especially high and low tides, called spring tides. When they are at right angles, the smaller neap tides occur.""",
     ["What mainly causes tides?", "Why do many places have two high tides a day?", "What are spring tides, and when do they happen?"]),
    ("""Safety rules for the Makers' Workshop. Everyone must complete the introduction session before using any machine, and the laser cutter and the lathe each need a separate short training course. Safety glasses must be worn at all times in the machine area, and long hair must be tied back. Never leave the laser cutter running unattended, even for a minute, because the material can catch fire. Report any damaged tools to the duty volunteer and put a red tag on them so that nobody else uses them. Clean your bench and sweep the floor around your machine when you finish. The workshop is open to members from 6 pm to 9 pm on weekdays and from 10 am to 4 pm on Saturdays, and at least two people must be present whenever machines are in use.""",
     ["Which machines need extra training?", "What should I do if I find a damaged tool?", "How many people must be present when machines are in use?"]),
    ("""A survey of 1,200 office workers in the region, carried out in January, asked how they feel about working from home. Sixty-two percent said they now work from home at least two days a week, compared with fifteen percent five years ago. The benefit mentioned most often was saving time and money on commuting, followed by fewer interruptions when doing focused work. The most common drawbacks were feeling less connected to colleagues and finding it harder to switch off at the end of the day. Younger workers were more likely than older ones to say they missed the office, often because they valued learning from more experienced colleagues. Most people said their ideal arrangement would be a mix of home and office days rather than working entirely from one place.""",
     ["What share of workers now work from home at least two days a week?", "What drawbacks of working from home did people mention?", "Why were younger workers more likely to miss the office?"]),
    ("""Coral reefs are built by tiny animals called coral polyps, which live in large colonies and build hard skeletons of calcium carbonate. Over many years these skeletons pile up into reefs that can stretch for kilometres. Most reef-building corals live in partnership with microscopic algae that live inside their tissues. The algae use sunlight to make food, and they share much of it with the coral, which is why these reefs grow in clear, shallow, sunlit water. When the water stays too warm for too long, the corals expel the algae and turn white, a process called bleaching. Bleached corals are not dead, but they are weakened and can die if the heat lasts. Reefs cover a tiny part of the ocean floor but provide homes for a large share of marine species.""",
     ["What are coral reefs made of?", "What is coral bleaching?", "Why do reef-building corals need sunlit water?"]),
    ("""SolarPath garden lights come in a pack of eight and need no wiring. Each light has a small solar panel on top that charges a built-in battery during the day, and the light switches on automatically at dusk. After a full day of sun, the lights shine for up to ten hours; in winter or after cloudy days the running time may be shorter. There are two colour settings, warm white and cool white, chosen with a switch under the lid. The lights are rated IP65, so they can stay outside in rain, but they should not be placed under water. To install, push the spike into soft ground, or use the screws provided to fix the light to a fence or deck. The battery can be replaced and is expected to last about two years.""",
     ["How long do the lights shine after a sunny day?", "How do you choose the colour of the light?", "Can the lights be left outside in the rain?"]),
]
SUMMARY_ASKS = [
    "Summarise the following text in two sentences.",
    "Write a one-sentence summary of this passage.",
    "List the three most important points in the passage below.",
    "Explain the main idea of this text to a ten-year-old.",
    "Give a short title and a two-sentence summary for the text below.",
    "Summarise the passage below in about 40 words.",
]
CONTEXT_ASKS = [
    "Answer the question using only the context.",
    "Read the context and answer the question. Use the wording of the context where you can.",
    "Use the information below to answer the question. If the answer is not in the context, say so.",
]

# --- code to edit ---------------------------------------------------------------------------
PYTHON_SNIPPETS = [
    """def count_words(text):
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts""",
    """def celsius_to_fahrenheit(values):
    result = []
    for celsius in values:
        result.append(celsius * 9 / 5 + 32)
    return result""",
    """def find_max(numbers):
    biggest = numbers[0]
    for number in numbers[1:]:
        if number > biggest:
            biggest = number
    return biggest""",
    """class BankAccount:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += amount

    def withdraw(self, amount):
        if amount > self.balance:
            print("Insufficient funds")
        else:
            self.balance -= amount""",
    """import json

def load_config(path):
    with open(path) as handle:
        config = json.load(handle)
    if "name" not in config:
        config["name"] = "default"
    return config""",
    """def is_leap_year(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)""",
    """def merge_settings(defaults, overrides):
    merged = dict(defaults)
    for key, value in overrides.items():
        merged[key] = value
    return merged""",
    """def chunk_list(items, size):
    chunks = []
    for start in range(0, len(items), size):
        chunks.append(items[start:start + size])
    return chunks""",
    """def total_price(cart):
    total = 0
    for item in cart:
        total = total + item["price"] * item["quantity"]
    if total > 100:
        total = total * 0.9
    return total""",
    """def read_csv_rows(path):
    rows = []
    with open(path) as handle:
        header = handle.readline().strip().split(",")
        for line in handle:
            values = line.strip().split(",")
            rows.append(dict(zip(header, values)))
    return rows""",
]
JAVASCRIPT_SNIPPETS = [
    """function filterActiveUsers(users) {
  var result = [];
  for (var i = 0; i < users.length; i++) {
    if (users[i].active) {
      result.push(users[i].email);
    }
  }
  return result;
}""",
    """function formatDate(date) {
  var day = date.getDate();
  var month = date.getMonth() + 1;
  var year = date.getFullYear();
  return day + "/" + month + "/" + year;
}""",
]
PYTHON_TASKS = [
    "Add docstrings to this code.",
    "Add type hints to this code.",
    "Explain what this code does, step by step.",
    "Write two pytest tests for this code.",
    "Suggest one improvement to this code and show the new version.",
    "Rewrite this code so that it is shorter but behaves the same.",
]
JAVASCRIPT_TASKS = [
    "Rewrite this JavaScript with modern syntax (const, let, arrow functions or array methods).",
    "Add a JSDoc comment to this function.",
    "Explain what this JavaScript function does.",
    "Convert this JavaScript function to TypeScript with type annotations.",
]

# --- translation ----------------------------------------------------------------------------
SENTENCES = [
    "I usually take the bus to work, but today I walked.",
    "The shop on the corner sells fresh bread every morning.",
    "Can you help me find my keys? I think I left them in the kitchen.",
    "It rained all weekend, so we stayed at home and played cards.",
    "My brother is learning to play the guitar.",
    "The meeting has been moved to Thursday afternoon.",
    "We would like two coffees and a glass of orange juice, please.",
    "The children are playing in the garden.",
    "How much does a ticket for the concert cost?",
    "Our flight was delayed by three hours because of the snow.",
    "She has lived in this city for ten years.",
    "Please turn off the lights when you leave the room.",
    "This soup is too hot to eat right now.",
    "The doctor told me to drink more water.",
    "I forgot my umbrella on the train.",
    "Thank you for the lovely dinner last night.",
    "The road to the village is closed because of a fallen tree.",
    "He always reads the newspaper before breakfast.",
    "Where can I buy a map of the city?",
    "The new bridge will open next spring.",
    "We are going to the beach if the weather is good.",
    "My phone battery is almost empty.",
    "The library has thousands of old books.",
    "Could you speak a little more slowly, please?",
]
LANGUAGES = ["French", "Spanish", "German", "Italian", "Portuguese"]
TRANSLATE_ASKS = [
    'Translate into {lang}: "{text}"',
    'How would you say this in {lang}? "{text}"',
    "Translate the following sentence into {lang}.\n\n{text}",
]

# --- maths: templates with numbers drawn from a seeded generator ------------------------------
NAMES = ["Amira", "Ben", "Chloe", "Diego", "Elif", "Finn", "Grace", "Hiro", "Isla", "Jonas", "Kemi", "Leo"]


def _shopping(rng):
    name, a, p, q = rng.choice(NAMES), rng.randint(2, 9), rng.randint(2, 6), rng.randint(2, 4)
    return (f"{name} buys {a} notebooks at {p} dollars each and a pen for {q} dollars. How much does {name} spend in total? Show your working.",
            f"{a} x {p} + {q} = {a * p + q} dollars")


def _film(rng):
    h, m, d = rng.randint(13, 20), rng.choice([0, 10, 15, 30, 45]), rng.choice([85, 95, 110, 125, 140])
    end = h * 60 + m + d
    return f"A film starts at {h}:{m:02d} and lasts {d} minutes. At what time does it end? Explain step by step.", f"{end // 60}:{end % 60:02d}"


def _sharing(rng):
    n = rng.randint(3, 7)
    k = n * rng.randint(4, 9) + rng.randint(1, n - 1)
    return (f"{n} friends share {k} sweets equally. How many sweets does each friend get, and how many are left over? Solve step by step.",
            f"{k // n} each, {k % n} left over")


def _distance(rng):
    v, t = rng.choice([12, 15, 16, 18, 20, 24]), rng.choice([2, 3, 4, 5])
    return f"A cyclist rides at {v} km per hour for {t} hours. How far does she travel? Show each step.", f"{v} x {t} = {v * t} km"


def _discount(rng):
    price, off = 20 * rng.randint(2, 9), rng.choice([10, 20, 25, 50])
    cut = price * off // 100
    return (f"A jacket costs {price} dollars and is on sale with {off} percent off. What is the sale price? Show your reasoning.",
            f"{price} - {cut} = {price - cut} dollars")


def _saving(rng):
    name, start, weekly, weeks = rng.choice(NAMES), rng.randint(10, 60), rng.randint(5, 20), rng.randint(4, 12)
    return (f"{name} has {start} dollars and saves {weekly} dollars a week. How much will {name} have after {weeks} weeks? Explain each step.",
            f"{start} + {weekly} x {weeks} = {start + weekly * weeks} dollars")


def _carpet(rng):
    length, width, cost = rng.randint(4, 9), rng.randint(2, 4), rng.randint(8, 25)
    return (f"A room is {length} m long and {width} m wide. Carpet costs {cost} dollars per square metre. How much does it cost to carpet the room? Solve step by step.",
            f"{length} x {width} = {length * width} square metres; x {cost} = {length * width * cost} dollars")


def _pizza(rng):
    name, slices, a, b = rng.choice(NAMES), rng.choice([8, 10, 12]), rng.randint(1, 3), rng.randint(1, 3)
    return (f"A pizza is cut into {slices} slices. {name} eats {a} and a friend eats {b}. What fraction of the pizza is left? Show your working.",
            f"{slices - a - b}/{slices} = {Fraction(slices - a - b, slices)}")


def _ages(rng):
    name, age, times, later = rng.choice(NAMES), rng.randint(6, 12), rng.choice([3, 4]), rng.randint(2, 10)
    return (f"{name} is {age} years old, and {name}'s mother is {times} times as old. How old will the mother be in {later} years? Explain step by step.",
            f"{age} x {times} + {later} = {age * times + later}")


def _tank(rng):
    rate = rng.choice([4, 5, 6, 8])
    volume = rate * rng.randint(10, 30)
    return (f"A tap fills a {volume}-litre tank at {rate} litres per minute. How many minutes does it take to fill the tank? Show each step.",
            f"{volume} / {rate} = {volume // rate} minutes")


MATHS_KINDS = [_shopping, _film, _sharing, _distance, _discount, _saving, _carpet, _pizza, _ages, _tank]


def maths_problems(rng, per_kind=4):
    """Word problems with their worked answers; numbers redrawn until every text is new."""
    seen, out = set(), []
    for _ in range(per_kind):
        for kind in MATHS_KINDS:
            text, answer = kind(rng)
            while text in seen:
                text, answer = kind(rng)
            seen.add(text)
            out.append((text, answer))
    return out


# --- open chat and general instructions -----------------------------------------------------
CHAT = [
    "What are some fun things to do on a rainy Sunday?",
    "How can I get better at remembering people's names?",
    "What makes a good friend, in your opinion?",
    "I feel nervous before job interviews. Any advice?",
    "What is a nice way to celebrate a friend's birthday on a small budget?",
    "Can you recommend a simple dinner I can cook in twenty minutes?",
    "How do I keep my houseplants alive when I go travelling?",
    "Why do cats like to sit in boxes?",
    "What should I think about before getting a dog?",
    "How can I make my morning routine less stressful?",
    "What are the pros and cons of living in a big city?",
    "I want to learn a new language. Where should I start?",
    "What are some good questions to ask on a first date?",
    "How do I stay motivated to exercise in winter?",
    "Tell me something interesting about octopuses.",
    "Which season do you think is the best, and why?",
    "How can I be more patient with my younger brother?",
    "What are some tips for a long car journey with children?",
    "How can I save money on groceries?",
    "What is a good way to thank a teacher at the end of the school year?",
    "I have trouble falling asleep. What can I try?",
    "Which board games are good for a group of six adults?",
    "How do I start running if I have never done it before?",
    "What should I do on my first day at a new job?",
    "Tell me a short story about a lighthouse and a seagull.",
    "How can I make friends after moving to a new town?",
    "What are some relaxing things to do after a busy day?",
    "Describe your idea of a perfect picnic.",
    "How do I deal politely with a noisy neighbour?",
    "What are some ways to use less plastic at home?",
    "Can you suggest a theme for a children's birthday party?",
    "Why do people like collecting things?",
    "What would you pack for a weekend in a big city?",
    "How can I keep a conversation going with someone I do not know well?",
    "What are some tips for writing a good thank-you card?",
    "What makes a holiday feel relaxing?",
    "I want to decorate my room on a small budget. Any ideas?",
    "How can I spend less time scrolling on my phone?",
    "Tell me a joke about vegetables.",
    "What are some good ways to spend time with grandparents?",
]
CONCEPTS = ["photosynthesis", "inflation", "compound interest", "gravity", "how the internet sends data",
            "recycling", "how volcanoes form", "electric current", "the stock market", "DNA",
            "the difference between weather and climate", "time zones", "a password manager", "black holes",
            "how rainbows form"]
EXPLAIN_ASKS = ["Explain {x} in simple terms.", "What is {x}? Answer in a short paragraph.", "Help me understand {x} with an everyday example."]
POEM_FORMS = ["haiku", "four-line poem", "limerick", "short poem"]
POEM_TOPICS = ["a rainy morning", "a lost sock", "the first snow of winter", "a busy kitchen", "a cat watching birds",
               "the last day of summer", "a city at night", "a slow train", "a garden in spring", "an old bicycle"]
LIST_TOPICS = ["tips for studying for an exam", "healthy snacks to take to work", "ways to save energy at home",
               "questions to ask when renting a flat", "things to check before a long drive",
               "easy vegetables to grow on a balcony", "ideas for a family day out", "ways to welcome a new classmate",
               "skills that are useful in any job", "things to do before going on holiday"]
REWRITES = [
    ("more formal", "Hey, can you send me that report by tomorrow?"),
    ("more polite", "Give me the bill."),
    ("simpler", "The municipality is undertaking the rehabilitation of the thoroughfare."),
    ("shorter", "I am writing to you today in order to let you know that I will not be able to come to the meeting that is taking place on Friday."),
    ("friendlier", "Your request has been received and will be processed."),
    ("more formal", "Sorry, we can't make it to the party."),
    ("more positive", "The hotel was okay but the room was small."),
    ("simpler", "Notwithstanding the inclement weather, the event proceeded as scheduled."),
    ("more polite", "Move your car, it's blocking my driveway."),
    ("more exciting", "The museum has a new dinosaur exhibition."),
]
EMAILS = ["a colleague, thanking them for their help with a project", "a hotel, asking whether they allow pets",
          "a neighbour, inviting them to a garden barbecue", "a shop, asking about a delivery that has not arrived",
          "a teacher, explaining that your child will miss school on Friday"]


def questions():
    """(category, text, reference) for every training prompt, grouped by category."""
    rng = random.Random(SEED)
    out = []
    for n, (passage, asks) in enumerate(PASSAGES):
        for j in range(3):
            out.append(("summarisation", f"{SUMMARY_ASKS[(n + 2 * j) % len(SUMMARY_ASKS)]}\n\n{passage}", None))
    for n, (passage, asks) in enumerate(PASSAGES):
        for j, question in enumerate(asks):
            out.append(("rag", f"{CONTEXT_ASKS[(n + j) % len(CONTEXT_ASKS)]}\n\nContext:\n{passage}\n\nQuestion: {question}", None))
    for n, code in enumerate(PYTHON_SNIPPETS):
        for j in range(4):
            out.append(("code", f"{PYTHON_TASKS[(n + j) % len(PYTHON_TASKS)]}\n\n```python\n{code}\n```", None))
    for code in JAVASCRIPT_SNIPPETS:
        for task in JAVASCRIPT_TASKS:
            out.append(("code", f"{task}\n\n```javascript\n{code}\n```", None))
    for n, sentence in enumerate(SENTENCES):
        for j, lang in enumerate((LANGUAGES[n % 5], LANGUAGES[(n + 2) % 5])):
            out.append(("translation", TRANSLATE_ASKS[(n + j) % len(TRANSLATE_ASKS)].format(lang=lang, text=sentence), None))
    out += [("maths", text, answer) for text, answer in maths_problems(rng)]
    out += [("chat", text, None) for text in CHAT]
    out += [("general", EXPLAIN_ASKS[n % 3].format(x=x), None) for n, x in enumerate(CONCEPTS)]
    out += [("general", f"Write a {POEM_FORMS[n % 4]} about {topic}.", None) for n, topic in enumerate(POEM_TOPICS)]
    out += [("general", f"List five {topic}.", None) for topic in LIST_TOPICS]
    out += [("general", f'Rewrite this sentence to make it {style}: "{text}"', None) for style, text in REWRITES]
    out += [("general", f"Write a short email to {who}.", None) for who in EMAILS]
    return out


def main(argv):
    target = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("train.jsonl")
    lines = []
    for n, (category, text, reference) in enumerate(questions()):
        row = {"question_id": FIRST_ID + n, "category": category, "turns": [text]}
        if reference:
            row["reference"] = [reference]
        lines.append(json.dumps(row, ensure_ascii=False))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} prompts to {target}")


if __name__ == "__main__":
    main(sys.argv)
