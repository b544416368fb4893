// Loreweave for SillyTavern: every generation asks Loreweave which lore enters the prompt, and
// SillyTavern places that lore exactly where it would place its own World Info.
//
// How: the generate interceptor (manifest "generate_interceptor") calls Loreweave's context call for
// the SillyTavern chat's own Loreweave chat (so timed effects persist) and keeps the answer's
// injections; when SillyTavern then loads its World Info entries for the scan
// (WORLDINFO_ENTRIES_LOADED), they are added as constant entries with the position, depth, role and
// outlet Loreweave chose. SillyTavern's own prompt builder then puts them before/after the character
// definitions, at depth with their role, around the Author's Note, around the examples or in an
// outlet — the same code path, so the same places. Loreweave down, slow or refusing: the generation
// goes on without its lore, and a toast says why once.

import { newWorldInfoEntryTemplate, world_info_position } from '../../../world-info.js';

const MODULE = 'loreweave';
const LOG = '[Loreweave]';
const WORLD = 'Loreweave';
const DEFAULT_TIMEOUT_MS = 1500;
const ST_ROLES = { system: 0, user: 1, assistant: 2 };

const defaults = Object.freeze({
    enabled: true,
    url: '',
    apiKey: '',
    profile: 'sillytavern',
    timeoutMs: DEFAULT_TIMEOUT_MS,
    // SillyTavern character (avatar file) → { characterId, bookIds, attached }
    characters: {},
});

/** Lore for the generation being built, read once by the World Info scan. */
let pendingLore = null;
/** The request in flight, cancelled when the user stops the generation. */
let inflight = null;
/** The reason last toasted: the same failure is said once, not every turn. */
let lastToasted = '';

function ctx() {
    return SillyTavern.getContext();
}

function settings() {
    const all = ctx().extensionSettings;
    all[MODULE] = Object.assign({}, structuredClone(defaults), all[MODULE] || {});
    return all[MODULE];
}

function baseUrl() {
    return String(settings().url || '').trim().replace(/\/+$/, '');
}

class LoreweaveError extends Error {
    /** @param {string} kind down|slow|key|cors|refused|stopped @param {string} message */
    constructor(kind, message, status = 0) {
        super(message);
        this.kind = kind;
        this.status = status;
    }
}

/**
 * One call to Loreweave's API with the key, a timeout and an outside abort signal.
 * A browser cannot tell a missing CORS origin from a server that is down (both are a TypeError), so
 * the caller asks the public library, readable from every origin, to tell them apart.
 */
async function api(method, path, body, { timeoutMs, signal } = {}) {
    const s = settings();
    const controller = new AbortController();
    const limit = Number(timeoutMs ?? s.timeoutMs) || DEFAULT_TIMEOUT_MS;
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; controller.abort(); }, limit);
    const onOuterAbort = () => controller.abort();
    signal?.addEventListener('abort', onOuterAbort);
    let response;
    try {
        response = await fetch(`${baseUrl()}/api/v1/${path}`, {
            method,
            headers: {
                'Authorization': `Api-Key ${String(s.apiKey || '').trim()}`,
                ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
            },
            body: body === undefined ? undefined : JSON.stringify(body),
            signal: controller.signal,
            credentials: 'omit',
        });
    } catch (error) {
        if (signal?.aborted) throw new LoreweaveError('stopped', 'The generation was stopped.');
        if (timedOut) throw new LoreweaveError('slow', `Loreweave did not answer within ${(limit / 1000).toFixed(1)} s.`);
        throw await unreachable();
    } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onOuterAbort);
    }
    let data = null;
    try {
        data = await response.json();
    } catch {
        data = null;
    }
    if (!response.ok) {
        const code = data?.error?.code || data?.code || '';
        const detail = data?.error?.message || data?.detail || data?.message || response.statusText;
        if (response.status === 401 || (response.status === 403 && code !== 'origin_not_allowed')) {
            throw new LoreweaveError('key', `Loreweave refused the API key (${response.status}): ${detail}`, response.status);
        }
        if (code === 'origin_not_allowed') throw corsError();
        throw new LoreweaveError('refused', `Loreweave refused the call (${response.status}${code ? ` ${code}` : ''}): ${detail}`, response.status);
    }
    return data;
}

function corsError() {
    return new LoreweaveError('cors',
        `Loreweave does not allow this page's origin (${location.origin}). A tenant admin adds it under "Browser origins" `
        + `on Loreweave's API keys page (PUT /api/v1/tenant/cors).`);
}

/** Tells "Loreweave is down" from "Loreweave is up but does not allow this origin". */
async function unreachable() {
    const url = baseUrl();
    if (!url) return new LoreweaveError('down', 'No Loreweave URL is set.');
    try {
        const controller = new AbortController();
        const timer = setTimeout(() => controller.abort(), 1000);
        const response = await fetch(`${url}/api/v1/library/languages`, { signal: controller.signal, credentials: 'omit' });
        clearTimeout(timer);
        if (response.ok) return corsError();
    } catch {
        // Down or unreachable: said below.
    }
    return new LoreweaveError('down', `Loreweave at ${url} cannot be reached.`);
}

function stCharacter() {
    const c = ctx();
    if (c.groupId || c.characterId === undefined || c.characterId === null) return null;
    return c.characters[c.characterId] || null;
}

function characterTags(character) {
    const c = ctx();
    const ids = c.tagMap?.[character.avatar] || [];
    return ids.map(id => c.tags.find(tag => tag.id === id)?.name).filter(Boolean);
}

function mappingFor(character) {
    const s = settings();
    s.characters[character.avatar] ??= { characterId: null, bookIds: [], attached: [] };
    return s.characters[character.avatar];
}

/** The Loreweave character whose books this SillyTavern character uses, made (and given its books) on first use. */
async function ensureLoreweaveCharacter(character, signal) {
    const mapping = mappingFor(character);
    if (!mapping.characterId) {
        const made = await api('POST', 'characters', {
            name: String(character.name).slice(0, 120),
            lineage_key: `sillytavern:${character.avatar}`.slice(0, 200),
        }, { signal, timeoutMs: 5000 });
        mapping.characterId = made.id;
        mapping.attached = [];
        ctx().saveSettingsDebounced();
    }
    const missing = (mapping.bookIds || []).filter(id => !(mapping.attached || []).includes(id));
    for (const bookId of missing) {
        try {
            await api('POST', 'attachments', { target: 'character', target_id: mapping.characterId, book_id: bookId },
                { signal, timeoutMs: 5000 });
        } catch (error) {
            // Already attached answers 409: the book is there, which is what we wanted.
            if (!(error instanceof LoreweaveError && error.status === 409)) throw error;
        }
        mapping.attached = [...(mapping.attached || []), bookId];
        ctx().saveSettingsDebounced();
    }
    return mapping.characterId;
}

/** This SillyTavern chat's Loreweave chat: made on first use, remembered in the chat's metadata. */
async function ensureLoreweaveChat(character, signal) {
    const c = ctx();
    const s = settings();
    const remembered = c.chatMetadata[MODULE];
    if (remembered?.chatId && remembered.url === baseUrl() && remembered.profile === s.profile) return remembered.chatId;
    const characterId = await ensureLoreweaveCharacter(character, signal);
    const made = await api('POST', 'chats', { kind: 'character', character_id: characterId, profile: s.profile },
        { signal, timeoutMs: 5000 });
    c.chatMetadata[MODULE] = { chatId: made.id, url: baseUrl(), profile: s.profile, characterId };
    await c.saveMetadata();
    return made.id;
}

function contextBody(chat, contextSize, type, character) {
    const c = ctx();
    const fields = c.getCharacterCardFields();
    const persona = String(c.powerUserSettings?.persona_description || '');
    // SillyTavern takes the reply being swiped out of the chat before the interceptor runs; Loreweave
    // expects it (and leaves it out of the scan itself), so it goes back at the end.
    const swiped = type === 'swipe' ? c.chat.at(-1) : null;
    const source = swiped && chat.at(-1) !== swiped ? [...chat, swiped] : chat;
    const messages = source
        .filter(message => message && !message.is_system && typeof message.mes === 'string')
        .map(message => ({
            role: message.is_user ? 'user' : 'assistant',
            text: message.mes.slice(0, 100000),
            name: String(message.name || (message.is_user ? c.name1 : c.name2)).slice(0, 120),
        }));
    const knownTypes = ['normal', 'continue', 'impersonate', 'swipe', 'regenerate', 'quiet'];
    return {
        messages,
        names: { user: String(c.name1 || 'User').slice(0, 120), char: String(c.name2 || character.name).slice(0, 120) },
        model: { input_window: Math.max(256, Number(contextSize) || 4096) },
        profile: settings().profile,
        generation_type: knownTypes.includes(type) ? type : 'normal',
        character: { name: String(character.avatar?.replace(/\.[^.]+$/, '') || character.name).slice(0, 200), tags: characterTags(character) },
        match_texts: {
            persona_description: persona,
            character_description: String(fields.description || ''),
            character_personality: String(fields.personality || ''),
            character_depth_prompt: String(fields.charDepthPrompt || ''),
            scenario: String(fields.scenario || ''),
            creator_notes: String(fields.creatorNotes || ''),
        },
    };
}

/** Where SillyTavern would put a World Info entry that Loreweave put in this slot. */
function placementOf(slot) {
    if (slot === 'before_char') return { position: world_info_position.before };
    if (slot === 'after_char') return { position: world_info_position.after };
    if (slot === 'authors_note_top') return { position: world_info_position.ANTop };
    if (slot === 'authors_note_bottom') return { position: world_info_position.ANBottom };
    if (slot === 'examples_before') return { position: world_info_position.EMTop };
    if (slot === 'examples_after') return { position: world_info_position.EMBottom };
    if (slot.startsWith('depth_')) return { position: world_info_position.atDepth, depth: Number(slot.slice(6)) || 0 };
    if (slot.startsWith('outlet_')) return { position: world_info_position.outlet, outletName: slot.slice(7) };
    // Other profiles' slots (lorebook, canon, relevant, …) read as lore before the character.
    return { position: world_info_position.before };
}

/**
 * Loreweave's injections as constant World Info entries. SillyTavern sorts by `order` and joins
 * ascending within a position (outlets descending), so the order numbers keep Loreweave's order.
 */
function asWorldInfoEntries(injections) {
    return injections.map((injection, index) => {
        const place = placementOf(String(injection.slot || ''));
        const order = place.position === world_info_position.outlet ? injections.length - index : index + 1;
        return {
            ...structuredClone(newWorldInfoEntryTemplate),
            uid: 900000 + index,
            world: WORLD,
            comment: `Loreweave entry ${injection.entry} (book ${injection.book})`,
            content: String(injection.content || ''),
            constant: true,
            selective: false,
            order,
            position: place.position,
            depth: place.depth ?? newWorldInfoEntryTemplate.depth,
            outletName: place.outletName ?? '',
            role: ST_ROLES[injection.role] ?? 0,
            // Loreweave already chose, cut to budget and decided recursion: SillyTavern only places.
            ignoreBudget: true,
            excludeRecursion: true,
            preventRecursion: true,
            useProbability: false,
            probability: 100,
        };
    });
}

function setStatus(text, kind = '') {
    const element = document.getElementById('loreweave_status');
    if (!element) return;
    element.textContent = text;
    element.classList.toggle('ok', kind === 'ok');
    element.classList.toggle('error', kind === 'error');
}

/** Says a failure once (in a toast), and always in the panel. */
function reportFailure(error) {
    const message = error instanceof LoreweaveError ? error.message : `Loreweave failed: ${error}`;
    const kind = error instanceof LoreweaveError ? error.kind : 'error';
    console.warn(LOG, message);
    setStatus(`${message}\nGenerations go on without Loreweave's lore.`, 'error');
    if (kind === 'stopped') return;
    if (lastToasted !== message) {
        lastToasted = message;
        toastr.warning(`${message} This reply is written without Loreweave's lore.`, 'Loreweave', { preventDuplicates: true });
    }
}

/** The generate interceptor: SillyTavern awaits it once per generation, before the prompt is built. */
globalThis.loreweaveInterceptor = async function (chat, contextSize, abort, type) {
    pendingLore = null;
    const s = settings();
    if (!s.enabled || !baseUrl() || !s.apiKey) return;
    const character = stCharacter();
    if (!character) return; // Group chats and the empty welcome screen: not served yet.
    inflight?.abort();
    const controller = new AbortController();
    inflight = controller;
    try {
        const chatId = await ensureLoreweaveChat(character, controller.signal);
        const answer = await api('POST', `chats/${chatId}/context`, contextBody(chat, contextSize, type, character),
            { signal: controller.signal });
        const injections = Array.isArray(answer?.injections) ? answer.injections : [];
        pendingLore = asWorldInfoEntries(injections);
        lastToasted = '';
        const note = document.getElementById('loreweave_last_turn');
        if (note) note.textContent = `Last turn (${type || 'normal'}): ${injections.length} entr${injections.length === 1 ? 'y' : 'ies'} from Loreweave chat ${chatId}.`;
        setStatus('Connected.', 'ok');
    } catch (error) {
        if (error instanceof LoreweaveError && error.status === 404) {
            // The remembered Loreweave chat is gone: the next turn makes a new one.
            delete ctx().chatMetadata[MODULE];
        }
        reportFailure(error);
    } finally {
        if (inflight === controller) inflight = null;
    }
};

function onEntriesLoaded(lore) {
    if (!pendingLore || !Array.isArray(lore?.globalLore)) return;
    lore.globalLore.push(...pendingLore);
}

function clearPending() {
    pendingLore = null;
}

function onGenerationStopped() {
    inflight?.abort();
    pendingLore = null;
}

async function testConnection() {
    const s = settings();
    if (!baseUrl()) return setStatus('Set the Loreweave URL first.', 'error');
    if (!s.apiKey) return setStatus('Set the API key first.', 'error');
    setStatus('Testing…');
    try {
        const books = await api('GET', 'books', undefined, { timeoutMs: 5000 });
        const list = Array.isArray(books) ? books : (books?.results || []);
        setStatus(`Connected to ${baseUrl()}: the key works from this page and sees ${books?.count ?? list.length} book(s).`, 'ok');
    } catch (error) {
        setStatus(error instanceof LoreweaveError ? error.message : String(error), 'error');
    }
}

function parseIds(text) {
    return String(text).split(/[\s,]+/).map(Number).filter(n => Number.isInteger(n) && n > 0);
}

function refreshCharacterFields() {
    const character = stCharacter();
    const label = document.getElementById('loreweave_character_name');
    const idInput = document.getElementById('loreweave_character_id');
    const booksInput = document.getElementById('loreweave_book_ids');
    if (!label) return;
    const disabled = !character;
    idInput.disabled = disabled;
    booksInput.disabled = disabled;
    if (!character) {
        label.textContent = ctx().groupId ? 'Group chats are not served by Loreweave yet.' : 'No character selected.';
        idInput.value = '';
        booksInput.value = '';
        return;
    }
    const mapping = mappingFor(character);
    label.textContent = `${character.name} (${character.avatar})`;
    idInput.value = mapping.characterId ?? '';
    booksInput.value = (mapping.bookIds || []).join(', ');
}

function bind(id, key, read = element => element.value) {
    const element = document.getElementById(id);
    element.addEventListener('input', () => {
        settings()[key] = read(element);
        ctx().saveSettingsDebounced();
    });
}

async function init() {
    const html = await (await fetch(new URL('settings.html', import.meta.url))).text();
    const container = document.getElementById('extensions_settings2') || document.getElementById('extensions_settings');
    container.insertAdjacentHTML('beforeend', html);
    const s = settings();
    document.getElementById('loreweave_enabled').checked = !!s.enabled;
    document.getElementById('loreweave_url').value = s.url;
    document.getElementById('loreweave_key').value = s.apiKey;
    document.getElementById('loreweave_profile').value = s.profile;
    bind('loreweave_enabled', 'enabled', element => element.checked);
    bind('loreweave_url', 'url', element => element.value.trim());
    bind('loreweave_key', 'apiKey', element => element.value.trim());
    document.getElementById('loreweave_profile').addEventListener('change', event => {
        settings().profile = event.target.value;
        ctx().saveSettingsDebounced();
    });
    document.getElementById('loreweave_character_id').addEventListener('input', event => {
        const character = stCharacter();
        if (!character) return;
        const mapping = mappingFor(character);
        const value = Number(event.target.value);
        mapping.characterId = Number.isInteger(value) && value > 0 ? value : null;
        mapping.attached = [];
        delete ctx().chatMetadata[MODULE];
        ctx().saveSettingsDebounced();
    });
    document.getElementById('loreweave_book_ids').addEventListener('input', event => {
        const character = stCharacter();
        if (!character) return;
        mappingFor(character).bookIds = parseIds(event.target.value);
        ctx().saveSettingsDebounced();
    });
    const onKey = handler => event => {
        if (event.type === 'click' || event.key === 'Enter' || event.key === ' ') handler();
    };
    for (const type of ['click', 'keydown']) {
        document.getElementById('loreweave_test').addEventListener(type, onKey(testConnection));
        document.getElementById('loreweave_new_chat').addEventListener(type, onKey(async () => {
            delete ctx().chatMetadata[MODULE];
            await ctx().saveMetadata();
            setStatus('The next turn starts a new Loreweave chat.', 'ok');
        }));
    }
    const { eventSource, eventTypes } = ctx();
    eventSource.on(eventTypes.WORLDINFO_ENTRIES_LOADED, onEntriesLoaded);
    eventSource.on(eventTypes.GENERATION_STOPPED, onGenerationStopped);
    eventSource.on(eventTypes.GENERATION_ENDED, clearPending);
    eventSource.on(eventTypes.CHAT_CHANGED, () => { clearPending(); setTimeout(refreshCharacterFields, 0); });
    // The panel always shows the character on screen, whenever it is opened.
    document.querySelector('#loreweave_settings .inline-drawer-toggle').addEventListener('click', refreshCharacterFields);
    refreshCharacterFields();
}

jQuery(async () => {
    try {
        await init();
    } catch (error) {
        console.error(LOG, 'could not start', error);
    }
});
