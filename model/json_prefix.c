/*
 * json_prefix.c — prefixes of one JSON object, byte by byte (json_prefix.h).
 *
 * A pushdown recogniser: the stack holds the open containers, the state
 * says what may come next. Numbers have no terminator of their own, so a
 * byte that cannot extend a number ends it and is read again as what
 * follows a value. Whitespace runs are bounded so a constrained model cannot
 * loop on blanks forever.
 */
#include "model/json_prefix.h"

enum {
    S_START,      /* before the top-level '{'                       */
    S_OBJ_FIRST,  /* after '{': a key or '}'                         */
    S_OBJ_KEY,    /* after ',' in an object: a key                   */
    S_COLON,      /* after a key                                     */
    S_VALUE,      /* after ':' or ',' in an array: a value           */
    S_ARR_FIRST,  /* after '[': a value or ']'                       */
    S_AFTER,      /* after a value: ',' or the closing bracket       */
    S_STR, S_STR_ESC, S_STR_HEX,
    S_NUM_MINUS, S_NUM_ZERO, S_NUM_INT, S_NUM_DOT, S_NUM_FRAC, S_NUM_E, S_NUM_E_SIGN, S_NUM_E_DIG,
    S_LIT,
    S_DONE,
};

static const char *const literals[3] = { "true", "false", "null" };

void het_json_prefix_init(struct het_json_prefix *j)
{
    *j = (struct het_json_prefix){ .st = S_START };
}

bool het_json_prefix_done(const struct het_json_prefix *j) { return j->st == S_DONE; }

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* a value (or the end of a container) is complete */
static void value_done(struct het_json_prefix *j)
{
    j->st = j->depth == 0 ? S_DONE : S_AFTER;
}

static bool open_container(struct het_json_prefix *j, unsigned char c)
{
    if (j->depth == HET_JSON_MAX_DEPTH) return false;
    j->stack[j->depth++] = c;
    j->st = c == '{' ? S_OBJ_FIRST : S_ARR_FIRST;
    return true;
}

static bool close_container(struct het_json_prefix *j, unsigned char c)
{
    if (!j->depth || j->stack[j->depth - 1] != (c == '}' ? '{' : '[')) return false;
    j->depth--;
    value_done(j);
    return true;
}

/* the first byte of a value */
static bool start_value(struct het_json_prefix *j, unsigned char c)
{
    if (c == '{' || c == '[') return open_container(j, c);
    if (c == '"') {
        j->st = S_STR;
        j->key = 0;
        return true;
    }
    if (c == '-') { j->st = S_NUM_MINUS; return true; }
    if (c == '0') { j->st = S_NUM_ZERO; return true; }
    if (is_digit(c)) { j->st = S_NUM_INT; return true; }
    for (uint8_t i = 0; i < 3; i++)
        if (c == (unsigned char)literals[i][0]) {
            j->st = S_LIT;
            j->lit = i;
            j->lit_pos = 1;
            return true;
        }
    return false;
}

static bool string_byte(struct het_json_prefix *j, unsigned char c)
{
    if (j->cont) {
        if (c < j->cont_lo || c > j->cont_hi) return false;
        j->cont--;
        j->cont_lo = 0x80;
        j->cont_hi = 0xBF;
        return true;
    }
    if (c == '"') {
        if (j->key) j->st = S_COLON;
        else value_done(j);
        return true;
    }
    if (c == '\\') { j->st = S_STR_ESC; return true; }
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x80) return true;
    j->cont_lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    j->cont_hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (c >= 0xC2 && c <= 0xDF) j->cont = 1;
    else if (c >= 0xE0 && c <= 0xEF) j->cont = 2;
    else if (c >= 0xF0 && c <= 0xF4) j->cont = 3;
    else return false;
    return true;
}

static bool feed_byte(struct het_json_prefix *j, unsigned char c)
{
    if (is_ws(c) && j->st <= S_AFTER) {
        if (j->st == S_START && j->ws >= HET_JSON_MAX_WS) return false;
        return ++j->ws <= HET_JSON_MAX_WS;
    }
    if (j->st <= S_AFTER) j->ws = 0;
    switch (j->st) {
    case S_START: return c == '{' && open_container(j, c);
    case S_OBJ_FIRST:
        if (c == '}') return close_container(j, c);
        /* fall through */
    case S_OBJ_KEY:
        if (c != '"') return false;
        j->st = S_STR;
        j->key = 1;
        return true;
    case S_COLON:
        if (c != ':') return false;
        j->st = S_VALUE;
        return true;
    case S_ARR_FIRST:
        if (c == ']') return close_container(j, c);
        /* fall through */
    case S_VALUE: return start_value(j, c);
    case S_AFTER:
        if (c == '}' || c == ']') return close_container(j, c);
        if (c != ',' || !j->depth) return false;
        j->st = j->stack[j->depth - 1] == '{' ? S_OBJ_KEY : S_VALUE;
        return true;
    case S_STR: return string_byte(j, c);
    case S_STR_ESC:
        if (c == 'u') {
            j->st = S_STR_HEX;
            j->hex = 4;
            return true;
        }
        j->st = S_STR;
        return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
    case S_STR_HEX:
        if (!is_hex(c)) return false;
        if (--j->hex == 0) j->st = S_STR;
        return true;
    case S_NUM_MINUS:
        if (!is_digit(c)) return false;
        j->st = c == '0' ? S_NUM_ZERO : S_NUM_INT;
        return true;
    case S_NUM_INT:
        if (is_digit(c)) return true;
        /* fall through */
    case S_NUM_ZERO:
        if (c == '.') { j->st = S_NUM_DOT; return true; }
        if (c == 'e' || c == 'E') { j->st = S_NUM_E; return true; }
        break; /* the number ends here */
    case S_NUM_DOT:
        if (!is_digit(c)) return false;
        j->st = S_NUM_FRAC;
        return true;
    case S_NUM_FRAC:
        if (is_digit(c)) return true;
        if (c == 'e' || c == 'E') { j->st = S_NUM_E; return true; }
        break;
    case S_NUM_E:
        if (c == '+' || c == '-') { j->st = S_NUM_E_SIGN; return true; }
        /* fall through */
    case S_NUM_E_SIGN:
        if (!is_digit(c)) return false;
        j->st = S_NUM_E_DIG;
        return true;
    case S_NUM_E_DIG:
        if (is_digit(c)) return true;
        break;
    case S_LIT:
        if (c != (unsigned char)literals[j->lit][j->lit_pos]) return false;
        if (!literals[j->lit][++j->lit_pos]) value_done(j);
        return true;
    default: return false; /* S_DONE: nothing may follow */
    }
    /* a complete number, ended by c: read c as what follows a value */
    value_done(j);
    return feed_byte(j, c);
}

bool het_json_prefix_feed(struct het_json_prefix *j, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!feed_byte(j, (unsigned char)s[i])) return false;
    return true;
}
