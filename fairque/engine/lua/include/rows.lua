-- The rows a call sends flat: one MessagePack array of rows of a fixed width, one row
-- after the other, and its payloads in ARGV.

-- The flat MessagePack array `packed` of `count` rows of `width` values each, one row
-- after the other, or nil if it does not hold that many (or, with `one_value_each`, if
-- ARGV[4..] do not hold one value per row: payloads, results). Calls send their rows
-- flat: decoding a small table per row cost ~3k instructions per row.
local function read_rows(count, width, packed, one_value_each)
  local values = cmsgpack.unpack(packed)
  count = tonumber(count)
  if type(values) ~= 'table' or count == nil or #values ~= count * width then return nil end
  if one_value_each and #ARGV ~= 3 + count then return nil end
  return values
end

-- Iterates over the rows of flat `values` (read_rows): i, and row i as one table refilled
-- for each row (read it, do not keep it).
local function each_row(values, width)
  local row, i, n = {}, 0, #values / width
  return function()
    i = i + 1
    if i > n then return nil end
    for k = 1, width do row[k] = values[(i - 1) * width + k] end
    return i, row
  end
end
