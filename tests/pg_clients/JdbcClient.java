// The PostgreSQL JDBC driver (what DBeaver, Metabase and Tableau use) against `gpuledger serve`,
// printing one JSON object of what it saw. Run as a source file:
//   java -cp /usr/share/java/postgresql.jar JdbcClient.java HOST PORT USER PASSWORD SQLFILE MONTH TEAM
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.*;
import java.util.*;

public class JdbcClient {
    public static void main(String[] a) throws Exception {
        String url = "jdbc:postgresql://" + a[0] + ":" + a[1] + "/finance";
        String cookbook = Files.readString(Path.of(a[4]));
        StringBuilder out = new StringBuilder("{");
        try (Connection c = DriverManager.getConnection(url, a[2], a[3])) {
            // What a BI tool's navigator lists.
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = c.getMetaData().getTables(null, "public", "%", new String[] {"TABLE", "VIEW"})) {
                while (rs.next()) tables.add("\"" + rs.getString("TABLE_NAME") + "\"");
            }
            out.append("\"tables\":[").append(String.join(",", tables)).append("],");
            try (PreparedStatement ps = c.prepareStatement(cookbook.replace("$month", "?").replace("$team", "?"))) {
                ps.setString(1, a[5]);
                ps.setString(2, a[6]);
                BigDecimal sum = BigDecimal.ZERO;
                int rows = 0;
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        sum = sum.add(rs.getBigDecimal("cloud_cost"));
                        rows++;
                    }
                }
                out.append("\"cloud_cost\":\"").append(sum.toPlainString()).append("\",\"rows\":").append(rows).append(",");
            }
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE gpu_samples");
                out.append("\"write\":\"accepted\",");
            } catch (SQLException e) {
                out.append("\"write\":\"").append(e.getSQLState()).append("\",");
            }
        }
        try (Connection c = DriverManager.getConnection(url, a[2], a[3] + "-wrong")) {
            out.append("\"bad_password\":\"accepted\"");
        } catch (SQLException e) {
            out.append("\"bad_password\":\"").append(e.getSQLState()).append("\"");
        }
        System.out.println(out.append("}"));
    }
}
