// node-postgres (npm `pg`) against `gpuledger serve`, printing one JSON object of what it saw.
// Usage: node node_client.js HOST PORT USER PASSWORD SQLFILE MONTH TEAM (NODE_PATH finds `pg`).
const fs = require('fs');
const { Client } = require('pg');

const [host, port, user, password, sqlFile, month, team] = process.argv.slice(2);
const cookbook = fs.readFileSync(sqlFile, 'utf8');

async function main() {
  const out = {};
  const client = new Client({ host, port: Number(port), user, password, database: 'finance' });
  await client.connect();
  const tables = await client.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1");
  out.tables = tables.rows.map((r) => r.table_name);
  // Positional parameters: the extended protocol with $1, $2.
  const res = await client.query(cookbook.replace('$month', '$1').replace('$team', '$2'), [month, team]);
  // NUMERIC arrives as text; sum in cents to stay exact.
  out.cloud_cost_cents = res.rows.reduce((s, r) => s + Math.round(Number(r.cloud_cost) * 100), 0);
  out.rows = res.rows.length;
  try {
    await client.query('UPDATE pods SET pod = $1', ['x']);
    out.write = 'accepted';
  } catch (e) {
    out.write = e.code;
  }
  await client.end();
  const bad = new Client({ host, port: Number(port), user, password: password + '-wrong', database: 'finance' });
  try {
    await bad.connect();
    out.bad_password = 'accepted';
    await bad.end();
  } catch (e) {
    out.bad_password = `${e.code}: ${e.message}`;
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
