"""sni.Item: the StatusNotifierItem's and dbusmenu's answers, without a bus.

Calls are made as jeepney messages and handed to Item.answer; the real bus,
registration and signals on the wire are in tests/integration/test_tray.py.
"""
import time

import pytest
from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call

from autosync.desktop import sni
from autosync.desktop.traystate import View


@pytest.fixture
def clicked():
    return []


@pytest.fixture
def item(tmp_path, clicked):
    view = View(str(tmp_path))
    view.status({"state": "idle"})
    return sni.Item(view, True, clicked.append)


def call(item, path, iface, member, signature=None, body=()):
    msg = new_method_call(DBusAddress(path, bus_name="org.example.Item", interface=iface), member,
                          signature, body)
    msg.header.serial = 7
    reply = item.answer(msg)
    if reply.header.message_type == MessageType.error:
        return reply.header.fields[HeaderFields.error_name]
    return reply.body


def test_properties_one_and_all(item):
    everything = call(item, sni.ITEM_PATH, sni.PROPERTIES, "GetAll", "s", (sni.ITEM,))[0]
    assert everything["Status"] == ("s", "Passive")
    assert everything["ToolTip"][0] == "(sa(iiay)ss)"
    assert everything["Menu"] == ("o", "/MenuBar")
    assert call(item, sni.ITEM_PATH, sni.PROPERTIES, "Get", "ss", (sni.ITEM, "IconName")) == (
        ("s", "emblem-default"),)
    assert call(item, sni.ITEM_PATH, sni.PROPERTIES, "Get", "ss", (sni.ITEM, "Nope")) == \
        "org.freedesktop.DBus.Error.UnknownProperty"
    assert call(item, sni.MENU_PATH, sni.PROPERTIES, "Get", "ss", (sni.MENU, "Version")) == (
        ("u", 3),)
    assert call(item, "/elsewhere", sni.PROPERTIES, "GetAll", "s", (sni.ITEM,)) == \
        "org.freedesktop.DBus.Error.UnknownProperty"


def test_layout_depth_and_unknown_ids(item):
    revision, (ident, props, children) = call(item, sni.MENU_PATH, sni.MENU, "GetLayout",
                                              "iias", (0, 0, []))
    assert (ident, children, props) == (0, [], {"children-display": ("s", "submenu")})
    _, (_, _, children) = call(item, sni.MENU_PATH, sni.MENU, "GetLayout", "iias",
                               (sni.RECENT, -1, ["label"]))
    assert children == [("(ia{sv}av)", (sni.RECENT_BASE, {"label": ("s", "none yet")}, []))]
    assert call(item, sni.MENU_PATH, sni.MENU, "GetLayout", "iias", (999, -1, [])) == \
        "com.canonical.dbusmenu.Error.UnknownId"
    [(ident, props)] = call(item, sni.MENU_PATH, sni.MENU, "GetGroupProperties", "aias",
                            ([sni.SYNC, 999], ["label"]))[0]
    assert (ident, props) == (sni.SYNC, {"label": ("s", "Sync now")})
    assert call(item, sni.MENU_PATH, sni.MENU, "GetProperty", "is", (sni.PAUSE, "label")) == (
        ("s", "Pause syncing"),)


def test_clicks_become_actions(item, clicked):
    call(item, sni.MENU_PATH, sni.MENU, "Event", "isvu", (sni.SYNC, "clicked", ("s", ""), 0))
    call(item, sni.MENU_PATH, sni.MENU, "Event", "isvu", (sni.OPEN, "hovered", ("s", ""), 0))
    call(item, sni.MENU_PATH, sni.MENU, "Event", "isvu", (sni.HEADLINE, "clicked", ("s", ""), 0))
    assert call(item, sni.MENU_PATH, sni.MENU, "EventGroup", "a(isvu)",
                ([(sni.PAUSE, "clicked", ("s", ""), 0), (sni.OPEN, "clicked", ("s", ""), 0)],)) \
        == ([],)
    assert clicked == ["sync", "pause", "open"]
    assert call(item, sni.MENU_PATH, sni.MENU, "AboutToShow", "i", (0,)) == (False,)
    assert call(item, sni.ITEM_PATH, sni.ITEM, "Activate", "ii", (0, 0)) == ()
    assert call(item, sni.MENU_PATH, sni.MENU, "Bogus") == \
        "org.freedesktop.DBus.Error.UnknownMethod"


def test_a_change_of_state_is_signalled(item):
    before = item.looks()
    assert not item.refresh() and item.signals(before, item.looks(), False) == []
    item.view.event({"event": "paused", "since": time.time(), "until": None, "time": 0})
    revision = item.revision
    assert item.refresh() and item.revision == revision + 1
    sent = item.signals(before, item.looks(), True)
    members = [m.header.fields[HeaderFields.member] for m in sent]
    assert members == ["NewIcon", "NewToolTip", "NewStatus", "LayoutUpdated"]
    assert sent[2].body == ("Active",) and sent[3].body == (revision + 1, 0)
