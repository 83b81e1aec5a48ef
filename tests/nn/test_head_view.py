"""The interactive head view, in a real browser: headless Chromium driven by Selenium.

The page is opened from disk; it must log no console errors; selecting a layer and hovering a
token must redraw the lines, and the lines drawn must be that token's weights in that layer
(one line per enabled head and key with nonzero weight, its opacity the weight). Toggling a head
removes its lines. A screenshot is saved next to the page.
"""

import shutil
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import viz

NO_BROWSER = ("Chromium and its driver are not installed: apt-get install -y chromium chromium-driver "
              "(and pip install selenium)")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "out" / "head_view"


def test_head_view_writes_a_self_contained_page(tmp_path):
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))  # (H=2, Lq=3, Lk=4)
    page = viz.head_view([weights, weights], ["a", "</script>", "c"], tmp_path / "view.html",
                         key_tokens=list("wxyz"))
    text = page.read_text()
    assert "<script src" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "</script>\"" not in text  # a token cannot close the script element
    with pytest.raises(ValueError, match="head_view: 2 query_tokens"):
        viz.head_view([weights], ["a", "b"], tmp_path / "bad.html")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason=NO_BROWSER)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if chromium is None or not Path(chromedriver).exists():
        pytest.skip(NO_BROWSER)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=900,700",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=chromedriver)
    browser = webdriver.Chrome(options=options, service=service)
    yield browser
    browser.quit()


def _lines(driver):
    return [{key: float(line.get_attribute(f"data-{key}")) for key in ("head", "query", "key", "weight")}
            | {"opacity": float(line.get_attribute("stroke-opacity"))}
            for line in driver.find_elements("css selector", "#lines line")]


def test_head_view_in_chromium(driver, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select

    ta.manual_seed(0)
    layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), num_layers=3).eval()
    tokens = ["time", "flies", "like", "an", "arrow"]
    for layer in layers.layers:
        layer.keep_attn_weights = True
    layers(ta.randn(1, 5, 16), mask=ta.nn.functional.padding_mask([4], 5))  # the last token is padding
    attentions = [layer.attn_weights.numpy()[0] for layer in layers.layers]  # 3 × (H=4, 5, 5)
    page = viz.head_view(attentions, tokens, tmp_path / "head_view.html")

    driver.get(page.as_uri())
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    before = _lines(driver)
    assert all(abs(line["opacity"] - 0.4 * line["weight"]) < 1e-6 for line in before)  # nothing hovered
    assert len(before) == 4 * 5 * 4  # every head, query and unmasked key: no line to the padded key

    Select(driver.find_element("id", "layer")).select_by_index(2)
    ActionChains(driver).move_to_element(driver.find_element("id", "query-1")).perform()
    after = _lines(driver)
    assert after != before and {line["query"] for line in after} == {1}
    expected = attentions[2][:, 1]  # (H, Lk): query "flies" in layer 2
    assert len(after) == int((expected > 0).sum()) == 16
    for line in after:
        weight = expected[int(line["head"]), int(line["key"])]
        assert abs(line["weight"] - weight) < 1e-6
        assert abs(line["opacity"] - weight) < 1e-6
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / "layer2_flies.png"))

    driver.find_element("id", "head-0").click()  # toggle head 0 off
    ActionChains(driver).move_to_element(driver.find_element("id", "query-1")).perform()
    toggled = _lines(driver)
    assert {int(line["head"]) for line in toggled} == {1, 2, 3}
    assert not [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    driver.save_screenshot(str(SCREENSHOTS / "layer2_flies_without_head0.png"))
    assert (SCREENSHOTS / "layer2_flies.png").read_bytes()[:4] == b"\x89PNG"
